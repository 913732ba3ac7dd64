/** How a job's efficiency reads (GET /api/jobs/{id}/efficiency; compare's `efficiency`). */
import type { components } from "../api/schema";

export type Efficiency = components["schemas"]["EfficiencyOut"];
export type MemoryEstimate = components["schemas"]["MemoryEstimateOut"];

/** Device-hours with as many digits as small runs need: 0.0042, 1.25, 310. */
export function formatDeviceHours(hours: number | null | undefined): string {
  if (hours === null || hours === undefined || !Number.isFinite(hours)) return "—";
  if (hours >= 100) return hours.toFixed(0);
  if (hours >= 1) return hours.toFixed(2);
  return hours.toPrecision(2);
}

/** A rate per device: "1,234 /s" (— when the job reported none). */
export function formatRate(rate: number | null | undefined): string {
  if (rate === null || rate === undefined || !Number.isFinite(rate)) return "—";
  return `${rate.toLocaleString("en-US", { maximumFractionDigits: rate >= 100 ? 0 : 1 })} /s`;
}

/** MFU as a percentage of peak, or the server's reason it has none ("none: CPU slots ..."). */
export function mfuText(e: Pick<Efficiency, "mfu" | "mfu_note">): string {
  if (e.mfu === null || e.mfu === undefined) return e.mfu_note;
  const percent = e.mfu * 100;
  return `${percent >= 10 ? percent.toFixed(1) : percent.toPrecision(2)}% of ${e.mfu_note}`;
}
