/** The y axis of a metric chart (job page and Compare), without a DOM: unit-tested. */
import type uPlot from "uplot";
import { formatByteTicks, formatBytes, formatTick, isBytesMetric, tickLabels } from "./format";

/**
 * Tick spacings for a byte axis: powers of two of B, KiB, MiB, GiB, TiB, so the ticks read
 * as whole units (128 MiB, 256 MiB), never "381.470 MiB" (uPlot's decimal spacings of bytes).
 */
export const BYTE_INCREMENTS: number[] = [0, 1, 2, 3, 4].flatMap((k) => [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].map((m) => m * 1024 ** k));

/** A byte axis: labelled without a unit (each tick names its own), ticks in one unit. */
export function byteAxis(label: string, extra: uPlot.Axis = {}): uPlot.Axis {
  return { label, size: 80, incrs: BYTE_INCREMENTS, values: (_u, ticks) => byteTickLabels(ticks), ...extra };
}

/** The ticks in one unit (formatByteTicks); a tick uPlot leaves unlabelled (null) stays blank. */
function byteTickLabels(ticks: readonly (number | null)[]): string[] {
  const shown = ticks.filter((t): t is number => t != null && Number.isFinite(t));
  const labels = formatByteTicks(shown);
  let next = 0;
  return ticks.map((t) => (t == null || !Number.isFinite(t) ? "" : labels[next++]!));
}

/**
 * Bytes in KiB/MiB/GiB, other values with the digits their ticks need; on a log scale
 * (`log`) each tick with its own digits (10, 1, 0.1, 0.05: the spacing is not one increment),
 * and the minor ticks uPlot leaves unlabelled stay blank.
 */
export function metricAxis(name: string, label: string, log = false): uPlot.Axis {
  if (isBytesMetric(name) && !log) return byteAxis(label);
  if (isBytesMetric(name)) return { label, size: 80, values: (_u, ticks) => tickLabels(ticks, formatBytes) };
  return { label, size: 72, values: (_u, ticks, _a, _s, increment) => tickLabels(ticks, (t) => formatTick(t, log ? t : increment)) };
}
