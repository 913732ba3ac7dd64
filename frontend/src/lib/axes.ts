/** The y axis of a metric chart (job page and Compare), without a DOM: unit-tested. */
import type uPlot from "uplot";
import { formatBytes, formatTick, isBytesMetric, tickLabels } from "./format";

/**
 * Bytes in KiB/MiB/GiB, other values with the digits their ticks need; on a log scale
 * (`log`) each tick with its own digits (10, 1, 0.1, 0.05: the spacing is not one increment),
 * and the minor ticks uPlot leaves unlabelled stay blank.
 */
export function metricAxis(name: string, label: string, log = false): uPlot.Axis {
  if (isBytesMetric(name)) return { label: `${label} (bytes)`, size: 72, values: (_u, ticks) => tickLabels(ticks, formatBytes) };
  return { label, size: 72, values: (_u, ticks, _a, _s, increment) => tickLabels(ticks, (t) => formatTick(t, log ? t : increment)) };
}
