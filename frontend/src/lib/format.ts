/** Display helpers: units, times in the viewer's zone, percentages. */

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "—";
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 || value >= 100 ? 0 : 1)} ${BYTE_UNITS[unit]}`;
}

/**
 * Byte axis ticks in one unit (the largest tick's), with as few decimals as keep them apart:
 * an idle device's 0–1 byte axis read "1 B, 1 B, 0 B" with formatBytes per tick. A tick
 * between whole bytes gets no label.
 */
export function formatByteTicks(ticks: number[]): string[] {
  const largest = Math.max(0, ...ticks.map((t) => Math.abs(t)).filter(Number.isFinite));
  let unit = 0;
  while (largest >= 1024 ** (unit + 1) && unit < BYTE_UNITS.length - 1) unit += 1;
  const scale = 1024 ** unit;
  // as many decimals as the ticks need to read exactly (0.25 KiB), at most 3
  const decimals = unit === 0 ? 0 : Math.min(3, Math.max(0, ...ticks.map((t) => decimalsOf(Number((t / scale).toPrecision(6))))));
  return ticks.map((t) => (unit === 0 && !Number.isInteger(t) ? "" : `${(t / scale).toFixed(decimals)} ${BYTE_UNITS[unit]}`));
}

/** Metrics counted in bytes (the engine's `peak_mem`; a script's `*_bytes`): drawn in KiB/MiB/GiB. */
export function isBytesMetric(name: string): boolean {
  return name === "peak_mem" || name.endsWith("_bytes");
}

/** Fraction digits that show `increment` exactly (0.25 → 2, 5 → 0), at most 12. */
function decimalsOf(increment: number): number {
  for (let d = 0; d < 12; d++) {
    const scaled = Math.abs(increment) * 10 ** d;
    if (Math.abs(scaled - Math.round(scaled)) <= 1e-9 * Math.max(1, scaled)) return d;
  }
  return 12;
}

/**
 * An axis tick: as many digits as the ticks' spacing needs (uPlot's default keeps 3
 * fraction digits, so ticks of 0.00002 all read "0"); exponent form below 1e-4 and from
 * 1e9 up.
 */
export function formatTick(value: number, increment: number): string {
  if (value === 0 || !Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs < 1e-4 || abs >= 1e9) {
    const digits = Math.floor(Math.log10(abs)) - Math.floor(Math.log10(Math.abs(increment) || abs));
    return value.toExponential(Math.min(6, Math.max(0, digits)));
  }
  // the value's own digits too: a log scale's ticks (0.01, 0.1, 1) are 10× apart
  const d = Math.max(decimalsOf(increment), decimalsOf(Number(value.toPrecision(6))));
  return value.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
}

/**
 * Labels for uPlot's axis `values`: on a log scale uPlot's filter hands null for the minor
 * ticks it leaves unlabelled (only powers of 10, or 1-2-5, or every digit, as the space
 * allows); formatting those drew an overlapping "null" per minor tick (issue #33).
 */
export function tickLabels(ticks: readonly (number | null)[], label: (tick: number) => string): string[] {
  return ticks.map((t) => (t == null || !Number.isFinite(t) ? "" : label(t)));
}

/** A metric's value in a table: bytes for byte metrics, else 4 significant digits. */
export function formatMetric(name: string, value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (isBytesMetric(name)) return formatBytes(value);
  return Math.abs(value) >= 1e4 || (value !== 0 && Math.abs(value) < 1e-3) ? value.toExponential(3) : value.toPrecision(4);
}

export function formatPercent(fraction: number | null | undefined, digits = 0): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return "—";
  return `${(fraction * 100).toFixed(digits)}%`;
}

/** Accepts unix seconds or an ISO string; null when absent or unparsable. */
export function toDate(value: string | number | null | undefined): Date | null {
  if (value === null || value === undefined) return null;
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });

/** Date and time in the viewer's own time zone. */
export function formatTime(value: string | number | null | undefined, withDate = true): string {
  const date = toDate(value);
  if (!date) return "—";
  return (withDate ? dateTime : timeOnly).format(date);
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  const s = Math.floor(seconds % 60);
  const m = Math.floor(seconds / 60) % 60;
  const h = Math.floor(seconds / 3600);
  return h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s}s` : `${s}s`;
}

/** "restarting in 8 s" for a job waiting out its restart back-off; "" for any other. */
export function restartIn(state: string, restartAt: string | null | undefined, nowMs: number): string {
  if (state !== "restarting" || !restartAt) return "";
  const seconds = Math.max(0, Math.ceil((Date.parse(restartAt) - nowMs) / 1000));
  return seconds > 0 ? `restarting in ${seconds} s` : "restarting now";
}
