/** The y axis of a metric chart (job page and Compare), without a DOM: unit-tested. */
import type uPlot from "uplot";
import { formatBytes, formatTick, isBytesMetric, tickLabels } from "./format";

/** Bytes in KiB/MiB/GiB, other values with the digits their ticks need; a log scale's unlabelled minor ticks stay blank. */
export function metricAxis(name: string, label: string): uPlot.Axis {
  return isBytesMetric(name)
    ? { label: `${label} (bytes)`, size: 72, values: (_u, ticks) => tickLabels(ticks, formatBytes) }
    : { label, size: 72, values: (_u, ticks, _a, _s, increment) => tickLabels(ticks, (t) => formatTick(t, increment)) };
}
