/** Training metrics of a job: the loss chart first, then one chart per other metric. */
import type uPlot from "uplot";
import type { MetricStore } from "../lib/series";
import type { Signal } from "../live";
import { axis, Chart, type ChartColors } from "./Chart";

/** The metric drawn as "the loss": `loss`, else `train/loss`, else the first with "loss" in it. */
export function lossMetric(names: string[]): string | undefined {
  return names.find((n) => n === "loss") ?? names.find((n) => n === "train/loss") ?? names.find((n) => n.includes("loss"));
}

function metricOptions(store: MetricStore, name: string, unit: string) {
  return (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: false } },
    axes: [axis(c, { label: "step" }), axis(c, { label: unit, size: 64 })],
    series: [
      { label: "step" },
      ...store.ranks(name).map((rank, i) => ({
        label: `rank ${rank}`,
        stroke: c.series[i % c.series.length],
        width: 1.5,
        spanGaps: true,
        points: { show: false },
      })),
    ],
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
  const loss = lossMetric(names);
  const others = names.filter((n) => n !== loss);
  const chart = (name: string, testId: string) => (
    <Chart
      key={name}
      testId={testId}
      title={name}
      options={metricOptions(store, name, name)}
      data={() => store.data(name)}
      subscribe={(fn) => changed.on((names) => names.has(name) && fn())}
      countAttr="data-points"
    />
  );
  return (
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
  );
}
