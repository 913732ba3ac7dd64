/** Training metrics of a job: the loss chart first, then one chart per other metric. */
import { useState } from "preact/hooks";
import type uPlot from "uplot";
import { metricAxis } from "../lib/axes";
import { formatBytes, isBytesMetric } from "../lib/format";
import { smooth, type AlignedData, type MetricStore } from "../lib/series";
import type { Signal } from "../live";
import { axis, Chart, type ChartColors } from "./Chart";

/** The metric drawn as "the loss": `loss`, else `train/loss`, else the first with "loss" in it. */
export function lossMetric(names: string[]): string | undefined {
  return names.find((n) => n === "loss") ?? names.find((n) => n === "train/loss") ?? names.find((n) => n.includes("loss"));
}

/** Units the engine's metric names imply (workers/rank/engine/train.py reports seconds and rates). */
function unitOf(name: string): string {
  if (name.endsWith("_time")) return `${name} (s)`;
  if (name.endsWith("_per_s")) return name.replace(/_per_s$/, " / s");
  return name;
}

/** Display smoothing (EMA) over each rank's column; the stored points stay raw. */
function smoothed(data: AlignedData, weight: number): AlignedData {
  if (weight <= 0) return data;
  const [xs, ...ys] = data;
  return [xs, ...ys.map((col) => smooth(col as (number | null)[], weight))];
}

function metricOptions(store: MetricStore, name: string, unit: string, log: boolean) {
  const bytes = isBytesMetric(name);
  const yAxis = metricAxis(name, bytes ? name : unit, log);
  return (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
    axes: [axis(c, { label: "step" }), axis(c, yAxis)],
    series: [
      { label: "step" },
      ...store.ranks(name).map((rank, i) => ({
        label: `rank ${rank}`,
        stroke: c.series[i % c.series.length],
        width: 1.5,
        spanGaps: true,
        points: { show: false },
        ...(bytes ? { value: (_u: uPlot, v: number | null) => (v == null ? "--" : formatBytes(v)) } : {}),
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
  const [weight, setWeight] = useState(0);
  const [log, setLog] = useState(false);
  const loss = lossMetric(names);
  const others = names.filter((n) => n !== loss);
  const chart = (name: string, testId: string) => (
    <Chart
      key={`${name}:${weight}:${log}`}
      testId={testId}
      title={name}
      options={metricOptions(store, name, unitOf(name), log)}
      data={() => smoothed(store.data(name), weight)}
      subscribe={(fn) => changed.on((names) => names.has(name) && fn())}
      countAttr="data-points"
    />
  );
  return (
    <>
      <div class="chart-tools">
        <label class="inline">
          smoothing {weight.toFixed(2)}{" "}
          <input type="range" min="0" max="0.99" step="0.01" data-testid="chart-smoothing" value={weight} onInput={(e) => setWeight(Number(e.currentTarget.value))} />
        </label>
        <label class="inline">
          <input type="checkbox" data-testid="chart-log" checked={log} onChange={(e) => setLog(e.currentTarget.checked)} /> log scale
        </label>
      </div>
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
