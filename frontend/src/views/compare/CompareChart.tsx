/** One metric of the compared jobs as aligned curves (the CSV of each is in the page's "Download CSV" menu). */
import { useMemo } from "preact/hooks";
import type uPlot from "uplot";
import type { Comparison, Job } from "../../api/types";
import { axis, Chart, type ChartColors } from "../../components/Chart";
import { metricAxis } from "../../lib/axes";
import { curveSeries, withSmoothed, yRange, type ChartView } from "../../lib/chartView";
import type { XMode } from "../../data";
import { formatDuration, formatTick, tickLabels } from "../../lib/format";
import { countPoints, type AlignedData } from "../../lib/series";

/** Where the server streams one metric of the jobs at every step as CSV. */
export function csvHref(ids: number[], metric: string, x: XMode): string {
  const query = new URLSearchParams([...ids.map((id) => ["job", String(id)]), ["metric", metric], ["x", x]]);
  return `/api/series/compare.csv?${query}`;
}

interface ChartProps {
  name: string;
  jobs: Job[];
  curves: Comparison["curves"][string];
  xMode: XMode;
  view: ChartView;
}

export const X_LABELS: Record<XMode, string> = { step: "step", time: "time since each job's start", wall: "wall time", device_hours: "device-hours" };

/** x ticks: durations for time since start, the spacing's digits for device-hours, steps as they are. */
function xValues(xMode: XMode): uPlot.Axis.Values | undefined {
  if (xMode === "time") return (_u, ticks) => tickLabels(ticks, formatDuration);
  if (xMode === "device_hours") return (_u, ticks, _a, _s, increment) => tickLabels(ticks, (t) => formatTick(t, increment));
  return undefined;
}

export function CompareChart({ name, jobs, curves, xMode, view }: ChartProps) {
  const data = useMemo(
    (): AlignedData => withSmoothed([curves.x, ...jobs.map((job) => curves.values[String(job.id)]!)], view.weight),
    [curves, jobs, view.weight],
  );
  const values = xValues(xMode);
  const range = yRange(view);
  const options = (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: xMode === "wall" }, y: { ...(view.log ? { distr: 3 } : {}), ...(range ? { range } : {}) } },
    axes: [axis(c, { label: X_LABELS[xMode], ...(values ? { values } : {}) }), axis(c, metricAxis(name, name, view.log))],
    series: [{ label: X_LABELS[xMode] }, ...curveSeries(jobs.map((job) => `#${job.id} ${job.name}`), c.series, view.weight, name)],
    cursor: { sync: { key: "compare" } },
  });
  // the raw curves' points: smoothing draws each again, it does not add points
  const raw = (d: AlignedData) => countPoints(view.weight > 0 ? ([d[0], ...d.slice(1, 1 + jobs.length)] as AlignedData) : d);
  return (
    <div data-testid={`compare-curve-${name}`} data-x={xMode}>
      <Chart testId={`compare-chart-${name}`} title={name} options={options} data={() => data} subscribe={() => () => {}} countAttr="data-points" count={raw} />
    </div>
  );
}
