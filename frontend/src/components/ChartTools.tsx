/** The controls over a page's metric charts (job page and Compare): x axis, smoothing, log scale, y range, outlier clipping. */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { DEFAULT_VIEW, rangeProblem, type ChartView } from "../lib/chartView";

/** What the controls set, kept by the page that draws the charts (`useChartTools`). */
export interface ChartToolsState<X extends string> {
  view: ChartView;
  setView: (view: ChartView) => void;
  x: X;
  setX: (x: X) => void;
  /** The metric the y range was last typed for; null: the first chart's. */
  chosen: string | null;
  setChosen: (name: string) => void;
}

/** A page's chart settings: the default view, x axis `firstX`, no metric chosen for the y range. */
export function useChartTools<X extends string>(firstX: X): ChartToolsState<X> {
  const [view, setView] = useState<ChartView>(DEFAULT_VIEW);
  const [x, setX] = useState<X>(firstX);
  const [chosen, setChosen] = useState<string | null>(null);
  return { view, setView, x, setX, chosen, setChosen };
}

/** The chart a typed y range applies to: the chosen metric, else the first of `metrics` (a loss range means nothing to grad_norm). */
export function yMetricOf(tools: Pick<ChartToolsState<string>, "chosen">, metrics: string[]): string | undefined {
  return tools.chosen ?? metrics[0];
}

interface Props<X extends string> {
  /** Test ids are `${prefix}-x`, `${prefix}-smoothing`, `${prefix}-log`, `${prefix}-ymin`, `${prefix}-ymax`, `${prefix}-clip`. */
  prefix: string;
  tools: ChartToolsState<X>;
  xModes: readonly (readonly [X, string])[];
  /** The charts' metrics, in the order drawn. */
  metrics: string[];
  /** More controls at the end of the row (Compare's CSV menu). */
  children?: ComponentChildren;
}

/** The y range's two bounds: the view's field, the word before its box, its test id's end. */
const Y_BOUNDS = [
  ["yMin", "from", "ymin"],
  ["yMax", "to", "ymax"],
] as const;

export function ChartTools<X extends string>({ prefix, tools, xModes, metrics, children }: Props<X>) {
  const { view, setView: onView, x, setX: onX, setChosen: onYMetric } = tools;
  const yMetric = yMetricOf(tools, metrics);
  const set = <K extends keyof ChartView>(key: K, value: ChartView[K]) => onView({ ...view, [key]: value });
  const problem = rangeProblem(view);
  return (
    <div class="toolbar chart-tools" role="group" aria-label="Chart settings">
      <label class="inline">
        x axis{" "}
        <select data-testid={`${prefix}-x`} value={x} onChange={(e) => onX(e.currentTarget.value as X)}>
          {xModes.map(([value, text]) => (
            <option value={value}>{text}</option>
          ))}
        </select>
      </label>
      <label class="inline" title="Exponential moving average; the raw curves stay drawn, faint">
        smoothing <output data-testid={`${prefix}-smoothing-value`}>{view.weight.toFixed(2)}</output>{" "}
        <input
          type="range"
          min="0"
          max="0.99"
          step="0.01"
          data-testid={`${prefix}-smoothing`}
          value={view.weight}
          onInput={(e) => set("weight", Number(e.currentTarget.value))}
        />
      </label>
      <label class="inline">
        <input type="checkbox" data-testid={`${prefix}-log`} checked={view.log} onChange={(e) => set("log", e.currentTarget.checked)} /> log scale
      </label>
      <span class="inline y-range">
        <label class="inline">
          y range of{" "}
          <select data-testid={`${prefix}-y-metric`} value={yMetric} onChange={(e) => onYMetric(e.currentTarget.value)}>
            {metrics.map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </label>
        {Y_BOUNDS.map(([key, word, testId]) => (
          <>
            {" "}
            <label class="inline">
              {word}{" "}
              <input
                class="narrow"
                type="text"
                inputMode="decimal"
                placeholder="auto"
                data-testid={`${prefix}-${testId}`}
                value={view[key]}
                onChange={(e) => set(key, e.currentTarget.value)}
                aria-invalid={problem !== null}
              />
            </label>
          </>
        ))}
      </span>
      <label class="inline" title="Scale y to the 1st–99th percentile of the values: a spike runs off the chart instead of flattening every other curve">
        <input type="checkbox" data-testid={`${prefix}-clip`} checked={view.clip} onChange={(e) => set("clip", e.currentTarget.checked)} /> clip outliers
      </label>
      {(view.yMin || view.yMax || view.clip) && (
        <button type="button" class="ghost small" data-testid={`${prefix}-y-reset`} onClick={() => onView({ ...view, yMin: "", yMax: "", clip: false })}>
          reset y
        </button>
      )}
      {problem && (
        <span class="error small" role="alert" data-testid={`${prefix}-range-problem`}>
          {problem}
        </span>
      )}
      {children}
    </div>
  );
}
