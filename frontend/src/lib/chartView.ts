/**
 * What a reader sets on a metric chart (job page and Compare), as W&B offers it: the x axis
 * (step, wall time, time since start), smoothing that keeps the raw curve visible, a log
 * scale, a fixed y range and outlier clipping. Pure: unit-tested without a DOM.
 */
import type uPlot from "uplot";
import { formatDuration, formatMetric } from "./format";
import { smooth, type AlignedData } from "./series";

/** The job page's x axes: the step, the clock, or seconds since the job's first point. */
export type XAxis = "step" | "wall" | "relative";

export interface ChartView {
  /** EMA weight in [0, 1); 0 draws the raw curves only. */
  weight: number;
  log: boolean;
  /** The y range's ends as typed ("" leaves that end to the data). */
  yMin: string;
  yMax: string;
  /** Scale y to the 1st–99th percentile of the drawn values: a spike runs off the chart instead of flattening every other curve. */
  clip: boolean;
}

export const DEFAULT_VIEW: ChartView = { weight: 0, log: false, yMin: "", yMax: "", clip: false };

/** The share of values at each end that outlier clipping leaves outside the y range. */
export const CLIP_QUANTILE = 0.01;

/** A typed y bound: a finite number, else null (left to the data). */
export function bound(text: string): number | null {
  if (text.trim() === "") return null;
  const value = Number(text);
  return Number.isFinite(value) ? value : null;
}

/** Whether the typed range reads (both ends numbers or blank, min below max; positive on a log scale). */
export function rangeProblem(view: ChartView): string | null {
  const [lo, hi] = [bound(view.yMin), bound(view.yMax)];
  if (view.yMin.trim() !== "" && lo === null) return "y min must be a number";
  if (view.yMax.trim() !== "" && hi === null) return "y max must be a number";
  if (lo !== null && hi !== null && lo >= hi) return "y min must be below y max";
  if (view.log && ((lo !== null && lo <= 0) || (hi !== null && hi <= 0))) return "a log scale needs positive bounds";
  return null;
}

/**
 * The lowest and highest value within the q-th and (1-q)-th quantiles of the columns' finite
 * values (positive ones only on a log scale), or null when there are none.
 */
export function quantileRange(columns: readonly (readonly (number | null)[])[], q: number, log = false): [number, number] | null {
  const values: number[] = [];
  for (const col of columns) for (const v of col) if (v !== null && Number.isFinite(v) && (!log || v > 0)) values.push(v);
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  const at = (p: number) => values[Math.min(values.length - 1, Math.max(0, Math.round(p * (values.length - 1))))]!;
  return [at(q), at(1 - q)];
}

/** [lo, hi] widened by 5% each side (by a factor on a log scale) so the extreme points stay off the frame. */
function padded([lo, hi]: [number, number], log: boolean): [number, number] {
  if (log) return [lo / 1.2, hi * 1.2];
  const span = hi - lo || Math.abs(hi) || 1;
  return [lo - span * 0.05, hi + span * 0.05];
}

/**
 * The y scale's range for the view: the typed bounds, the clipped range of the raw values
 * for an unset end, or uPlot's own fit when neither is asked for (undefined). `raw`: the raw
 * curves when uPlot draws fewer points than there are (a decimated chart); else its data.
 */
export function yRange(view: ChartView, raw?: () => AlignedData): uPlot.Scale.Range | undefined {
  const lo = bound(view.yMin);
  const hi = bound(view.yMax);
  if (rangeProblem(view) !== null || (lo === null && hi === null && !view.clip)) return undefined;
  return (u, dataMin, dataMax) => {
    // the raw curves decide (withSmoothed puts them first): a smoothed spike is no less an outlier
    const drawn = u.data.slice(1) as (number | null)[][];
    const curves = raw ? (raw().slice(1) as (number | null)[][]) : view.weight > 0 ? drawn.slice(0, drawn.length / 2) : drawn;
    const fit = view.clip ? quantileRange(curves, CLIP_QUANTILE, view.log) : null;
    const [fitLo, fitHi] = fit ? padded(fit, view.log) : [dataMin, dataMax];
    const low = lo ?? fitLo;
    const high = hi ?? fitHi;
    if (low == null || high == null || !(high > low)) return [dataMin, dataMax];
    return [low, high];
  };
}

/** A #rrggbb colour at `alpha` opacity (#rrggbbaa). */
export function faded(hex: string, alpha: number): string {
  const a = Math.round(Math.max(0, Math.min(1, alpha)) * 255)
    .toString(16)
    .padStart(2, "0");
  return /^#[0-9a-f]{6}$/i.test(hex) ? `${hex}${a}` : hex;
}

/**
 * The drawn columns: the raw curves, then (while smoothing) each curve's EMA. The raw ones stay,
 * drawn faint under the smoothed ones, as W&B and TensorBoard draw them.
 */
export function withSmoothed(data: AlignedData, weight: number): AlignedData {
  if (weight <= 0) return data;
  const [xs, ...ys] = data;
  return [xs, ...ys, ...ys.map((col) => smooth(col as (number | null)[], weight))];
}

/** uPlot series for `labels` (one per curve) under the view: raw ones faint while smoothing. */
export function curveSeries(labels: string[], colors: string[], weight: number, name: string): uPlot.Series[] {
  const value = (_u: uPlot, v: number | null) => (v == null ? "—" : formatMetric(name, v));
  const line = (label: string, stroke: string, width: number): uPlot.Series => ({
    label,
    stroke,
    width,
    spanGaps: true,
    points: { show: false },
    value,
  });
  const color = (i: number) => colors[i % colors.length]!;
  if (weight <= 0) return labels.map((l, i) => line(l, color(i), 1.5));
  return [...labels.map((l, i) => line(`${l} (raw)`, faded(color(i), 0.3), 1)), ...labels.map((l, i) => line(l, color(i), 1.75))];
}

/** The x axis' label and scale for a job page mode. */
export function xAxisOf(mode: XAxis): { label: string; time: boolean; values?: uPlot.Axis.Values } {
  if (mode === "wall") return { label: "wall time", time: true };
  if (mode === "relative") return { label: "time since the first point", time: false, values: (_u, ticks) => ticks.map((t) => (t == null ? "" : formatDuration(t))) };
  return { label: "step", time: false };
}
