import { describe, expect, it } from "vitest";
import { alignSeries, countPoints, DeviceStore, MetricStore, smooth, ofRank } from "../src/lib/series";
import { LogTail, jobsFromSnapshot, upsertJob } from "../src/lib/stores";
import { random } from "./random";
import type { Job } from "../src/api/types";

describe("MetricStore", () => {
  it("dedupes by (name, rank, step) and keeps one column per rank", () => {
    const store = new MetricStore();
    expect(store.add("loss", 0, 1, 2.0)).toBe(true);
    expect(store.add("loss", 0, 1, 9.9)).toBe(false);
    store.add("loss", 1, 1, 2.1);
    store.add("loss", 1, 2, 1.9);
    const data = store.data("loss");
    expect(data).toEqual([
      [1, 2],
      [2.0, null],
      [2.1, 1.9],
    ]);
    expect(countPoints(data)).toBe(3);
  });

  it("knows the newest step of any point (the job page's live progress)", () => {
    const store = new MetricStore();
    expect(store.newestStep).toBe(0);
    store.applyPoints([
      { name: "loss", rank: 1, step: 7, value: 1 },
      { name: "lr", rank: 0, step: 9, value: 0.1 },
    ] as Parameters<MetricStore["applyPoints"]>[0]);
    store.add("loss", 0, 3, 2);
    expect(store.newestStep).toBe(9);
  });

  it("a full window refuses points older than it holds", () => {
    const store = new MetricStore(3);
    for (const step of [1, 2, 3, 4]) store.add("loss", 0, step, step);
    expect(store.add("loss", 0, 1, 1)).toBe(false);
    expect(store.data("loss")[0]).toEqual([2, 3, 4]);
  });

  it("dedupes exactly as a set of the held steps would, in order or not, through evictions", () => {
    // the reference: a set of the steps held, the oldest-inserted evicted when over capacity
    // in order through many evictions (searched), rarely late, often late (a set from then on)
    for (const [seed, late] of [[1, 0], [2, 0.002], [3, 0.3]] as const) {
      const next = random(seed);
      const store = new MetricStore(50);
      const held: number[] = [];
      let newest = 0;
      for (let i = 0; i < 2_000; i += 1) {
        // the next steps, a repeat of a held one, a late one, one the window left behind
        const step = next() >= late ? newest + 1 + Math.floor(next() * 2) - (next() < 0.1 ? 1 : 0) : Math.max(0, newest - Math.floor(next() * 70));
        const full = held.length === 50;
        const expected = !held.includes(step) && !(full && step < held[0]!);
        expect(store.add("loss", 0, step, i)).toBe(expected);
        if (expected) {
          held.push(step);
          newest = Math.max(newest, step);
          if (held.length > 50) held.shift();
        }
      }
      expect(store.data("loss")[0]).toEqual([...held].sort((a, b) => a - b));
    }
  });

  it("a snapshot repeated after live points adds nothing (the in-order dedupe searches the buffer)", () => {
    const store = new MetricStore(100);
    const snapshot = { loss: { step: [1, 2, 3, 4], time: [1, 2, 3, 4], value: [4, 3, 2, 1], rank: [0, 0, 0, 0] } };
    expect(store.applySnapshot(snapshot)).toEqual(new Set(["loss"]));
    expect(store.applySnapshot(snapshot)).toEqual(new Set());
    expect(store.add("loss", 0, 0, 5)).toBe(true); // a late one: the buffer is out of order from here
    expect(store.applySnapshot(snapshot)).toEqual(new Set());
    expect(store.add("loss", 0, 0, 5)).toBe(false);
    expect(store.data("loss")).toEqual([
      [0, 1, 2, 3, 4],
      [5, 4, 3, 2, 1],
    ]);
  });
});

describe("alignSeries", () => {
  it("joins on the union of xs", () => {
    expect(alignSeries([[[1, 3], [10, 30]], [[2, 3], [20, 31]]])).toEqual([
      [1, 2, 3],
      [10, null, 30],
      [null, 20, 31],
    ]);
  });

  it("ranks on the same steps share the x column as is", () => {
    const xs = [1, 2, 3];
    expect(alignSeries([[xs, [1, 2, 3]], [[1, 2, 3], [4, 5, null]]])).toEqual([xs, [1, 2, 3], [4, 5, null]]);
    expect(alignSeries([[[1, 2], [1, 2]], [[1, 3], [4, 5]]])[0]).toEqual([1, 2, 3]);
  });

  it("merges live ranks a step or two apart at the newest end, as the union would", () => {
    // 8 ranks of 5,000 steps, rank r a little behind at the end: r steps fewer
    const tables = Array.from({ length: 8 }, (_, r): [number[], (number | null)[]] => {
      const xs = Array.from({ length: 5000 - r }, (_, i) => i);
      return [xs, xs.map((x) => x * 10 + r)];
    });
    const [xs, ...ys] = alignSeries(tables);
    expect(xs).toHaveLength(5000);
    expect(xs[4999]).toBe(4999);
    expect(ys[7]!.slice(-8)).toEqual([49927, null, null, null, null, null, null, null]); // rank 7 reached step 4992
    expect(ys[0]![4999]).toBe(49990);
    expect(ys[3]![4996]).toBe(49963);
    expect(ys[3]![4997]).toBeNull();
  });

  it("joins a table out of order (a resumed attempt's steps) by the union still", () => {
    expect(alignSeries([[[1, 3, 2], [10, 30, 20]], [[2, 4], [21, 41]]])).toEqual([
      [1, 2, 3, 4],
      [10, 20, 30, null],
      [null, 21, null, 41],
    ]);
  });
});

describe("DeviceStore", () => {
  it("dedupes samples by (node, device, time) and tracks the latest", () => {
    const store = new DeviceStore();
    const s = (time: number, util: number) => ({ node: "n1", device: 0, kind: "gpu" as const, time, util, mem_used: 1024 });
    expect(store.apply([s(1, 10), s(2, 20), s(2, 20)]).size).toBe(1);
    expect(store.apply([s(2, 20)]).size).toBe(0);
    expect(store.count("n1", 0)).toBe(2);
    expect(store.latest("n1", 0)?.util).toBe(20);
    expect(store.data("n1", 0)).toEqual([[1, 2], [10, 20], [1024, 1024]]);
    expect(store.sensors("n1", 0)).toEqual([[1, 2], [null, null], [null, null]]);
    expect(store.hasSensors("n1", 0)).toBe(false);
  });

  it("keeps a GPU's temperature and power beside utilization and memory", () => {
    const store = new DeviceStore();
    store.apply([
      { node: "g", device: 1, kind: "gpu", time: 2, util: 90, mem_used: 8, temperature: 71, power: 250.5 },
      { node: "g", device: 1, kind: "gpu", time: 1, util: 80, mem_used: 7, temperature: 70, power: null },
    ]);
    expect(store.hasSensors("g", 1)).toBe(true);
    expect(store.data("g", 1)).toEqual([[1, 2], [80, 90], [7, 8]]);
    expect(store.sensors("g", 1)).toEqual([[1, 2], [70, 71], [null, 250.5]]);
    expect(store.sensors("g", 9)).toEqual([[], [], []]);
  });
});

const job = (id: number, extra: Partial<Job> & { updated_at?: string } = {}): Job =>
  ({ id, name: `j${id}`, state: "running", node: "n1", devices: [0, 1], updated_at: "2025-01-01T00:00:02Z", ...extra }) as Job;

describe("job stores", () => {
  it("does not let an older copy of a job overwrite a newer one", () => {
    const jobs = jobsFromSnapshot([job(1)]);
    expect(upsertJob(jobs, job(1, { state: "scheduled", updated_at: "2025-01-01T00:00:01Z" }))).toBe(false);
    expect(jobs.get(1)?.state).toBe("running");
    expect(upsertJob(jobs, job(1, { state: "succeeded", updated_at: "2025-01-01T00:00:03Z" }))).toBe(true);
  });

  it("without updated_at every delta replaces the held copy", () => {
    const jobs = jobsFromSnapshot([job(1, { updated_at: undefined })]);
    expect(upsertJob(jobs, job(1, { state: "failed", updated_at: undefined }))).toBe(true);
    expect(jobs.get(1)?.state).toBe("failed");
  });

  it("log tail dedupes and caps", () => {
    const tail = new LogTail(2);
    const line = (seq: number) => ({ attempt_id: 1, rank: 0, stream: "stdout" as const, seq, line: `l${seq}`, time: seq });
    tail.apply([line(1), line(2)]);
    expect(tail.apply([line(2)])).toBe(false);
    tail.apply([line(3)]);
    expect(tail.lines.map((l) => l.seq)).toEqual([2, 3]);
  });

  it("log tail keeps lines ordered by time, rank and seq, in order or late", () => {
    const tail = new LogTail(4);
    const line = (rank: number, seq: number, time: number) => ({ attempt_id: 1, rank, stream: "stdout" as const, seq, line: `${rank}:${seq}`, time });
    tail.apply([line(0, 1, 10), line(1, 1, 10)]);
    tail.apply([line(0, 2, 11)]);
    tail.apply([line(1, 2, 10.5), line(0, 3, 12)]); // rank 1's line is late
    expect(tail.lines.map((l) => l.line)).toEqual(["1:1", "1:2", "0:2", "0:3"]); // capped at 4: "0:1" left
    // "0:1" left with the cap, so it is new again, and the oldest: sorted in, then capped off
    expect(tail.apply([line(0, 1, 10)])).toBe(true);
    expect(tail.lines.map((l) => l.line)).toEqual(["1:1", "1:2", "0:2", "0:3"]);
    expect(tail.apply([line(1, 2, 10.5)])).toBe(false);
  });
});

describe("smooth", () => {
  it("smooths with an EMA and keeps gaps", () => {
    expect(smooth([1, null, 3], 0.5)).toEqual([1, null, 2]);
    expect(smooth([1, 2], 0)).toEqual([1, 2]);
  });
});

describe("a board sparkline's rank", () => {
  // a hybrid job, 2 stages × 2 replicas: ranks 1 and 3 (the last stage) report the loss
  const snapshot = {
    loss: { step: [1, 1, 2, 2], time: [0, 0, 1, 1], value: [2.0, 2.1, 1.5, 1.6], rank: [1, 3, 1, 3] },
    step_time: { step: [1, 1, 1, 1], time: [0, 0, 0, 0], value: [0.1, 0.2, 0.3, 0.4], rank: [0, 1, 2, 3] },
  };

  it("keeps only the loss-reporting rank the server names; rank 0 has no loss to draw", () => {
    expect(ofRank(snapshot, 1)).toEqual({
      loss: { step: [1, 2], time: [0, 1], value: [2.0, 1.5], rank: [1, 1] },
      step_time: { step: [1], time: [0], value: [0.2], rank: [1] },
    });
    expect(Object.keys(ofRank(snapshot, 0))).toEqual(["step_time"]);
  });
});
