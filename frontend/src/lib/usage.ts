/** The usage view's data: per user per day allocated vs busy device-hours, chart columns, CSV. */
import type { components } from "../api/schema";

export type DailyUsageRow = components["schemas"]["DailyUsageRow"];

export interface UsageCell {
  day: string;
  user: string;
  allocatedHours: number;
  busyHours: number;
  /** busy / allocated in percent; null when nothing was allocated */
  busyPercent: number | null;
  /** what Slurm's accounting (sacct) says the same attempts were allocated; null unless the
   * executor is Slurm */
  slurmHours: number | null;
}

const hours = (seconds: number) => seconds / 3600;

/** Rows as the table shows them, newest day first, users by name within a day. */
export function usageCells(rows: DailyUsageRow[]): UsageCell[] {
  return rows
    .map((r) => ({
      day: r.day,
      user: r.user,
      allocatedHours: hours(r.allocated_device_seconds),
      busyHours: hours(r.busy_device_seconds),
      busyPercent: r.allocated_device_seconds > 0 ? (100 * r.busy_device_seconds) / r.allocated_device_seconds : null,
      slurmHours: r.slurm_allocated_device_seconds == null ? null : hours(r.slurm_allocated_device_seconds),
    }))
    .sort((a, b) => (a.day === b.day ? a.user.localeCompare(b.user) : a.day < b.day ? 1 : -1));
}

/**
 * Columnar chart data: x = each day's UTC midnight (seconds), then allocated and busy
 * device-hours summed over users; every day of [from, to) has a point (0 when idle).
 */
export function dailyColumns(rows: DailyUsageRow[], from: string, to: string): [number[], number[], number[]] {
  const totals = new Map<string, [number, number]>();
  for (const r of rows) {
    const cell = totals.get(r.day) ?? [0, 0];
    cell[0] += hours(r.allocated_device_seconds);
    cell[1] += hours(r.busy_device_seconds);
    totals.set(r.day, cell);
  }
  const xs: number[] = [];
  const allocated: number[] = [];
  const busy: number[] = [];
  const end = Date.parse(to);
  for (let day = Date.parse(from.slice(0, 10) + "T00:00:00Z"); day < end; day += 86_400_000) {
    const key = new Date(day).toISOString().slice(0, 10);
    const [a, b] = totals.get(key) ?? [0, 0];
    xs.push(day / 1000);
    allocated.push(a);
    busy.push(b);
  }
  return [xs, allocated, busy];
}

function csvField(value: string): string {
  return /[",\n\r]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** Whether any cell carries Slurm's accounting (the executor is Slurm): the table shows it. */
export function hasSlurm(cells: UsageCell[]): boolean {
  return cells.some((c) => c.slurmHours !== null);
}

/** The table as CSV (device-hours, 4 decimals), one line per user and day; Slurm's
 * accounting as a last column when the cells carry it. */
export function usageCsv(cells: UsageCell[]): string {
  const slurm = hasSlurm(cells);
  const lines = ["day,user,allocated_device_hours,busy_device_hours,busy_percent" + (slurm ? ",slurm_allocated_device_hours" : "")];
  for (const c of cells) {
    const percent = c.busyPercent === null ? "" : c.busyPercent.toFixed(1);
    const fields = [c.day, csvField(c.user), c.allocatedHours.toFixed(4), c.busyHours.toFixed(4), percent];
    if (slurm) fields.push(c.slurmHours === null ? "" : c.slurmHours.toFixed(4));
    lines.push(fields.join(","));
  }
  return lines.join("\n") + "\n";
}
