import { describe, expect, it } from "vitest";
import { MetricStore } from "../src/lib/series";
import { rankTimes } from "../src/lib/steptimes";

describe("per-rank step time", () => {
  it("averages the recent steps and flags the rank the others wait for", () => {
    const store = new MetricStore();
    for (let step = 1; step <= 30; step += 1) {
      store.add("step_time", 0, step, 0.1);
      store.add("step_time", 1, step, 0.11);
      store.add("step_time", 2, step, step > 10 ? 0.2 : 0.1); // slow only lately
      store.add("data_time", 2, step, 0.05);
    }
    const rows = rankTimes(store);
    expect(rows.map((r) => r.rank)).toEqual([0, 1, 2]);
    expect(rows[2]!.step_time).toBeCloseTo(0.2);
    expect(rows[2]!.data_time).toBeCloseTo(0.05);
    expect(rows[0]!.compute_time).toBeNull();
    expect(rows.map((r) => r.straggler)).toEqual([false, false, true]);
  });

  it("a single rank is never a straggler", () => {
    const store = new MetricStore();
    store.add("step_time", 0, 1, 5);
    expect(rankTimes(store)[0]!.straggler).toBe(false);
  });
});
