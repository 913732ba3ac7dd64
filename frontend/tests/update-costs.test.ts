import { describe, expect, it } from "vitest";
import type { JobSpec } from "../src/api/types";
import { costScales, showsUpdateCosts, spread, type Costs } from "../src/components/UpdateCosts";

const rank = (r: number, step_time: number | null, sent: number, received: number) => ({
  rank: r,
  step_time,
  bytes_sent: sent,
  bytes_received: received,
});

describe("update costs panel", () => {
  it("is shown for data-parallel jobs over two or more devices only", () => {
    const spec = (parallelism: object) => ({ name: "j", template: "mlp", parallelism }) as unknown as JobSpec;
    expect(showsUpdateCosts(spec({ strategy: "data", devices: 2 }))).toBe(true);
    expect(showsUpdateCosts(spec({ devices: 4, update: "async" }))).toBe(true);
    expect(showsUpdateCosts(spec({ strategy: "data", devices: 1 }))).toBe(false);
    expect(showsUpdateCosts(spec({ strategy: "model", devices: 2, pipeline_stages: 2 }))).toBe(false);
  });

  it("puts every run's bars on one scale: the slowest rank and the busiest link of all runs", () => {
    const sync: Costs = { job_id: 1, window: 50, server: null, ranks: [rank(0, 0.3, 100, 100), rank(1, 0.31, 100, 100)] };
    const ps: Costs = { job_id: 2, window: 50, server: null, ranks: [rank(0, 0.1, 300, 300), rank(1, 0.1, 100, 100)] };
    expect(costScales([sync, ps])).toEqual({ time: 0.31, bytes: 600 });
    expect(costScales([])).toEqual({ time: 0, bytes: 0 });
  });

  it("reads a straggler as the slowest rank's step time over the fastest's", () => {
    expect(spread([rank(0, 0.1, 0, 0), rank(1, 0.3, 0, 0)])).toBeCloseTo(3);
    expect(spread([rank(0, 0.1, 0, 0), rank(1, null, 0, 0)])).toBeNull();
    expect(spread([rank(0, 0.1, 0, 0)])).toBeNull();
  });
});
