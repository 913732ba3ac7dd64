/** One metric of the compared jobs as aligned curves, with a link to the same curves as CSV. */
import { useMemo } from "preact/hooks";
import type uPlot from "uplot";
import type { Comparison, Job } from "../../api/types";
import { axis, Chart, type ChartColors } from "../../components/Chart";
import { metricAxis } from "../../lib/axes";
import type { XMode } from "../../data";
import { smooth, type AlignedData } from "../../lib/series";

/** Where the server streams one metric of the jobs at every step as CSV. */
function csvHref(ids: number[], metric: string, x: XMode): string {
  const query = new URLSearchParams([...ids.map((id) => ["job", String(id)]), ["metric", metric], ["x", x]]);
  return `/api/series/compare.csv?${query}`;
}

interface ChartProps {
  name: string;
  jobs: Job[];
  curves: Comparison["curves"][string];
  xMode: XMode;
  /** the axis the CSV link asks for: the one chosen, even while its curves are loading */
  csvX: XMode;
  weight: number;
  logScale: boolean;
}

const X_LABELS: Record<XMode, string> = { step: "step", time: "seconds since start", device_hours: "device-hours" };

export function CompareChart({ name, jobs, curves, xMode, csvX, weight, logScale }: ChartProps) {
  const data = useMemo(
    (): AlignedData => [curves.x, ...jobs.map((job) => smooth(curves.values[String(job.id)]!, weight))],
    [curves, jobs, weight],
  );
  const options = (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: false }, y: logScale ? { distr: 3 } : {} },
    axes: [axis(c, { label: X_LABELS[xMode] }), axis(c, metricAxis(name, name, logScale))],
    series: [
      { label: xMode },
      ...jobs.map((job, i) => ({ label: `#${job.id} ${job.name}`, stroke: c.series[i % c.series.length], width: 1.5, spanGaps: true, points: { show: false } })),
    ],
    cursor: { sync: { key: "compare" } },
  });
  return (
    <div data-testid={`compare-curve-${name}`} data-x={xMode}>
      <Chart testId={`compare-chart-${name}`} title={name} options={options} data={() => data} subscribe={() => () => {}} countAttr="data-points" />
      <a class="csv-link small" data-testid={`compare-csv-${name}`} href={csvHref(jobs.map((j) => j.id), name, csvX)} title={`${name} of these jobs at every step, x: ${csvX}`} download>
        ↓ CSV
      </a>
    </div>
  );
}
