import { describe, expect, it } from "vitest";
import { FrameBatch, mergeJobChanges, type JobChanges } from "../src/lib/frameBatch";
import { MetricStore } from "../src/lib/series";
import { rankTimes } from "../src/lib/steptimes";

/** A hand-driven frame clock: `frame()` runs what was scheduled, like one animation frame. */
function clock() {
  let queued: (() => void)[] = [];
  let asked = 0;
  return {
    schedule: (run: () => void) => {
      asked += 1;
      queued.push(run);
      return asked;
    },
    cancel: () => {
      queued = [];
    },
    frame: () => {
      const run = queued;
      queued = [];
      run.forEach((fn) => fn());
    },
    get asked() {
      return asked;
    },
  };
}

const change = (names: string[], logs = false, events = false): JobChanges => ({ names: new Set(names), logs, events });

describe("FrameBatch", () => {
  it("flushes every message of a frame in one call and asks for one frame", () => {
    const c = clock();
    const flushed: JobChanges[] = [];
    const batch = new FrameBatch(mergeJobChanges, (b) => flushed.push(b), c.schedule, c.cancel);
    for (let i = 0; i < 100; i += 1) batch.add(change(i % 2 ? ["loss"] : ["lr"], i === 50, i === 70));
    expect(flushed).toHaveLength(0);
    expect(c.asked).toBe(1);
    c.frame();
    expect(flushed).toHaveLength(1);
    expect([...flushed[0]!.names].sort()).toEqual(["loss", "lr"]);
    expect(flushed[0]!.logs).toBe(true);
    expect(flushed[0]!.events).toBe(true);
  });

  it("starts a new batch after a flush and flushes nothing for a frame without messages", () => {
    const c = clock();
    const flushed: JobChanges[] = [];
    const batch = new FrameBatch(mergeJobChanges, (b) => flushed.push(b), c.schedule, c.cancel);
    batch.add(change(["loss"], true));
    c.frame();
    batch.add(change(["step_time"]));
    c.frame();
    c.frame();
    expect(flushed.map((b) => [[...b.names], b.logs])).toEqual([
      [["loss"], true],
      [["step_time"], false],
    ]);
    expect(c.asked).toBe(2);
  });

  it("does not mutate the first message's set, and drops what is pending on dispose", () => {
    const c = clock();
    const flushed: JobChanges[] = [];
    const batch = new FrameBatch(mergeJobChanges, (b) => flushed.push(b), c.schedule, c.cancel);
    const first = change(["loss"]);
    batch.add(first);
    batch.add(change(["lr"]));
    expect([...first.names]).toEqual(["loss"]);
    batch.dispose();
    c.frame();
    expect(flushed).toHaveLength(0);
  });
});

describe("step times read each rank's newest values without copying the series", () => {
  it("means the last 20 values per rank, skipping what arrived out of order correctly", () => {
    const store = new MetricStore(100);
    for (let step = 0; step < 150; step += 1) {
      store.add("step_time", 0, step, step < 130 ? 1 : 2); // last 20: all 2
      store.add("step_time", 1, step, 1);
    }
    store.add("step_time", 2, 5, 9); // rank 2: out of order below
    store.add("step_time", 2, 3, 3);
    const rows = rankTimes(store);
    expect(rows.map((r) => [r.rank, r.step_time])).toEqual([
      [0, 2],
      [1, 1],
      [2, 6],
    ]);
    expect(store.newest("step_time", 2, 1)).toEqual([9]); // x order: step 5 is the newest
    expect(store.newest("step_time", 0, 3)).toEqual([2, 2, 2]);
  });
});
