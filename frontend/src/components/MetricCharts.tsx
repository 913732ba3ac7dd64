/** Training metrics of a job: the loss chart first, then one chart per other metric. */
import type uPlot from "uplot";
import { metricAxis } from "../lib/axes";
import { curveSeries, withSmoothed, xAxisOf, yRange, type ChartView, type XAxis } from "../lib/chartView";
import { decimate } from "../lib/decimate";
import type { MetricStore } from "../lib/series";
import type { Signal } from "../live";
import { axis, Chart, type ChartColors } from "./Chart";
import { ChartTools, useChartTools, yMetricOf } from "./ChartTools";

/** The metric drawn as "the loss": `loss`, else `train/loss`, else the first with "loss" in it. */
export function lossMetric(names: string[]): string | undefined {
  return names.find((n) => n === "loss") ?? names.find((n) => n === "train/loss") ?? names.find((n) => n.includes("loss"));
}

/** The metrics in the order their charts stand: the loss first, then the others as given. */
export function lossFirst(names: string[]): string[] {
  const loss = lossMetric(names);
  return loss ? [loss, ...names.filter((n) => n !== loss)] : names;
}

/** Units the engine's metric names imply (workers/rank/engine/train.py reports seconds and rates). */
function unitOf(name: string): string {
  if (name.endsWith("_time")) return `${name} (s)`;
  if (name.endsWith("_per_s")) return name.replace(/_per_s$/, " / s");
  return name;
}

const X_MODES = [
  ["step", "step"],
  ["wall", "wall time"],
  ["relative", "relative time"],
] as const;

function metricOptions(store: MetricStore, name: string, unit: string, view: ChartView, x: XAxis) {
  const yAxis = metricAxis(name, unit, view.log);
  const xAxis = xAxisOf(x);
  // clipping reads every raw point, not the decimated ones uPlot draws
  const range = yRange(view, () => store.data(name, x, store.firstTime ?? 0));
  return (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: xAxis.time }, y: { ...(view.log ? { distr: 3 } : {}), ...(range ? { range } : {}) } },
    axes: [axis(c, { label: xAxis.label, ...(xAxis.values ? { values: xAxis.values } : {}) }), axis(c, yAxis)],
    series: [{ label: xAxis.label }, ...curveSeries(store.ranks(name).map((rank) => `rank ${rank}`), c.series, view.weight, name)],
    legend: { live: true },
    cursor: { sync: { key: "job-metrics" } },
  });
}

interface Props {
  store: MetricStore;
  changed: Signal<Set<string>>;
  names: string[];
}

export function MetricCharts({ store, changed, names }: Props) {
  const tools = useChartTools<XAxis>("step");
  const { view, x } = tools;
  const loss = lossMetric(names);
  const others = names.filter((n) => n !== loss);
  const yMetric = yMetricOf(tools, lossFirst(names));
  const settings = `${view.weight > 0}:${view.log}:${view.yMin}:${view.yMax}:${view.clip}:${x}`;
  const chart = (name: string, testId: string) => (
    <Chart
      key={`${name}:${settings}:${name === yMetric}`}
      testId={testId}
      title={name}
      options={metricOptions(store, name, unitOf(name), name === yMetric ? view : { ...view, yMin: "", yMax: "" }, x)}
      data={() => withSmoothed(store.data(name, x, store.firstTime ?? 0), view.weight)}
      // per-pixel min/max, kept as points arrive; smoothing decimates the smoothed columns afresh
      drawn={(px) => (view.weight > 0 ? decimate(withSmoothed(store.data(name, x, store.firstTime ?? 0), view.weight), px) : store.drawn(name, px, x, store.firstTime ?? 0))}
      points={() => store.count(name)}
      subscribe={(fn) => changed.on((names) => names.has(name) && fn())}
      countAttr="data-points"
    />
  );
  return (
    <>
      <ChartTools prefix="chart" tools={tools} xModes={X_MODES} metrics={lossFirst(names)} />
      <div class="metric-charts">
        {loss ? (
          chart(loss, "loss-chart")
        ) : (
          <figure class="chart">
            <figcaption>loss</figcaption>
            <div class="chart-box empty-chart" data-testid="loss-chart" data-points="0">
              No loss reported yet.
            </div>
          </figure>
        )}
        {others.map((name) => chart(name, `metric-chart-${name}`))}
      </div>
    </>
  );
}
