import { describe, expect, it } from "vitest";
import { dailyColumns, hasSlurm, usageCells, usageCsv, type DailyUsageRow } from "../src/lib/usage";

const rows: DailyUsageRow[] = [
  { day: "2026-01-01", user: "alice", allocated_device_seconds: 7200, busy_device_seconds: 3600 },
  { day: "2026-01-02", user: "bob", allocated_device_seconds: 3600, busy_device_seconds: 0 },
  { day: "2026-01-02", user: "alice", allocated_device_seconds: 3600, busy_device_seconds: 2700 },
];

describe("usage view data", () => {
  it("carries Slurm's accounting beside Trainboard's when the executor is Slurm", () => {
    const cells = usageCells([
      { day: "2026-01-01", user: "alice", allocated_device_seconds: 7200, busy_device_seconds: 3600, slurm_allocated_device_seconds: 7236 },
    ]);
    expect(cells[0]?.slurmHours).toBeCloseTo(2.01, 6);
    expect(hasSlurm(cells)).toBe(true);
    expect(hasSlurm(usageCells(rows))).toBe(false);
    expect(usageCsv(cells)).toBe(
      "day,user,allocated_device_hours,busy_device_hours,busy_percent,slurm_allocated_device_hours\n" +
        "2026-01-01,alice,2.0000,1.0000,50.0,2.0100\n",
    );
  });

  it("turns seconds into device-hours and a busy share, newest day first", () => {
    const cells = usageCells(rows);
    expect(cells.map((c) => [c.day, c.user])).toEqual([
      ["2026-01-02", "alice"],
      ["2026-01-02", "bob"],
      ["2026-01-01", "alice"],
    ]);
    expect(cells[0]).toMatchObject({ allocatedHours: 1, busyHours: 0.75, busyPercent: 75 });
    expect(cells[1]?.busyPercent).toBe(0);
  });

  it("sums users per day and fills idle days with zero", () => {
    const [xs, allocated, busy] = dailyColumns(rows, "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z");
    expect(xs).toEqual([1767225600, 1767312000, 1767398400]);
    expect(allocated).toEqual([2, 2, 0]);
    expect(busy).toEqual([1, 0.75, 0]);
  });

  it("writes CSV with a header and quotes names that need it", () => {
    const csv = usageCsv(
      usageCells([{ day: "2026-01-01", user: 'a,"b"', allocated_device_seconds: 7200, busy_device_seconds: 3600 }]),
    );
    expect(csv).toBe(
      'day,user,allocated_device_hours,busy_device_hours,busy_percent\n2026-01-01,"a,""b""",2.0000,1.0000,50.0\n',
    );
  });
});
