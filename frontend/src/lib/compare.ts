/** Side-by-side comparison of jobs: spec differences, final/best values, aligned curves, CSV. */
import type { AlignedData } from "./series";
import { alignSeries } from "./series";

/** The most jobs one comparison overlays. */
export const MAX_COMPARE = 10;

/** A columnar metric series as GET /api/jobs/{id}/metrics/{name} returns it. */
export interface Curve {
  step: number[];
  time: number[];
  value: number[];
}

/** Nested spec → dotted keys: {parallelism: {devices: 2}} → {"parallelism.devices": 2}. */
export function flatten(value: unknown, prefix = "", out: Record<string, unknown> = {}): Record<string, unknown> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0 && prefix) out[prefix] = {};
    for (const [key, inner] of entries) flatten(inner, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    out[prefix] = value;
  }
  return out;
}

export interface DiffRow {
  key: string;
  /** One value per job, in the jobs' order (undefined: the job's spec lacks the key). */
  values: unknown[];
  differs: boolean;
}

/** Keys that say nothing about how a run trains; shown but never counted as a difference. */
const IDENTITY_KEYS = new Set(["name"]);

/** Every spec key of the jobs, the differing ones first (then alphabetical). */
export function specDiff(specs: Record<string, unknown>[]): DiffRow[] {
  const flat = specs.map((s) => flatten(s));
  const keys = [...new Set(flat.flatMap((f) => Object.keys(f)))].sort();
  const rows = keys.map((key) => {
    const values = flat.map((f) => f[key]);
    const shown = values.map((v) => JSON.stringify(v ?? null));
    return { key, values, differs: !IDENTITY_KEYS.has(key) && new Set(shown).size > 1 };
  });
  return [...rows.filter((r) => r.differs), ...rows.filter((r) => !r.differs)];
}

/** Loss-like metrics are best when lowest; everything else (accuracy, throughput) when highest. */
export function lowerIsBetter(name: string): boolean {
  return /loss|err|perplex|ppl|time|latency|nan|mem/i.test(name);
}

export interface Summary {
  final: number | null;
  finalStep: number | null;
  best: number | null;
  bestStep: number | null;
}

export function summarize(name: string, curve: Curve | undefined): Summary {
  const none = { final: null, finalStep: null, best: null, bestStep: null };
  if (!curve || curve.value.length === 0) return none;
  const last = curve.value.length - 1;
  const lower = lowerIsBetter(name);
  let bestIndex = -1;
  curve.value.forEach((v, i) => {
    if (!Number.isFinite(v)) return;
    const held = bestIndex < 0 ? null : curve.value[bestIndex]!;
    if (held === null || (lower ? v < held : v > held)) bestIndex = i;
  });
  return {
    final: curve.value[last]!,
    finalStep: curve.step[last]!,
    best: bestIndex < 0 ? null : curve.value[bestIndex]!,
    bestStep: bestIndex < 0 ? null : curve.step[bestIndex]!,
  };
}

export type XMode = "step" | "time";

/** Curves on one x axis: by step, or by seconds since each job's own first point. */
export function alignCurves(curves: (Curve | undefined)[], mode: XMode): AlignedData {
  const tables = curves.map((c): [number[], (number | null)[]] => {
    if (!c || c.value.length === 0) return [[], []];
    if (mode === "step") return [c.step, c.value];
    const t0 = c.time[0]!;
    return [c.time.map((t) => Math.round((t - t0) * 1000) / 1000), c.value];
  });
  return alignSeries(tables);
}

/** Exponential moving average (TensorBoard's smoothing weight in [0, 1)); gaps stay gaps. */
export function smooth(values: (number | null)[], weight: number): (number | null)[] {
  if (weight <= 0) return values;
  let last: number | null = null;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    last = last === null ? v : last * weight + (1 - weight) * v;
    return last;
  });
}

function csvCell(value: unknown): string {
  if (value === null || value === undefined) return "";
  const text = String(value);
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** Aligned data as CSV: the x column, then one column per job. */
export function toCsv(header: string[], data: AlignedData): string {
  const lines = [header.map(csvCell).join(",")];
  data[0].forEach((x, i) => lines.push([x, ...data.slice(1).map((col) => (col as (number | null)[])[i])].map(csvCell).join(",")));
  return lines.join("\n") + "\n";
}
