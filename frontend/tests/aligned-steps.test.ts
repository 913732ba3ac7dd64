/**
 * The job page's charts by step draw the columns the store keeps aligned as points arrive
 * (`AlignedSteps`, issue #33): after every change they must equal a full alignment of the
 * ranks' buffers (`alignSeries`, what every redraw computed before).
 */
import { describe, expect, it } from "vitest";
import { random } from "./random";
import { alignSeries, MetricStore, type AlignedData } from "../src/lib/series";

/** The full alignment of the store's buffers: what `data` returned before it was incremental. */
function full(store: MetricStore, name: string): AlignedData {
  return alignSeries(store.columns(name).map(([xs, ys]) => [xs, ys!]));
}

function expectSame(store: MetricStore, name = "loss"): void {
  expect(store.data(name).map((col) => [...col])).toEqual(full(store, name).map((col) => [...col]));
}

describe("incremental alignment by step", () => {
  it("appends ranks a step or two apart, as live ranks report", () => {
    const store = new MetricStore();
    for (let step = 0; step < 50; step += 1) {
      for (let rank = 0; rank < 8; rank += 1) if (step - (rank % 3) >= 0) store.add("loss", rank, step - (rank % 3), step + rank / 10);
      expectSame(store);
    }
    expect(store.data("loss")[0]).toHaveLength(50);
  });

  it("places late and out-of-order points of a rank in their rows", () => {
    const store = new MetricStore();
    for (const step of [1, 2, 3, 6, 7]) store.add("loss", 0, step, step);
    for (const step of [7, 2]) store.add("loss", 1, step, -step);
    expectSame(store);
    store.add("loss", 1, 5, -5); // a step no rank had: a row inserted in the middle
    store.add("loss", 0, 0, 0); // before every row
    store.add("loss", 1, 6, -6); // into a row rank 0 made
    store.add("loss", 0, 4, 4);
    expectSame(store);
    expect(store.data("loss")).toEqual([
      [0, 1, 2, 3, 4, 5, 6, 7],
      [0, 1, 2, 3, 4, null, 6, 7],
      [null, null, -2, null, null, -5, -6, -7],
    ]);
  });

  it("a rank joining late gets a column of gaps before its first step, in rank order", () => {
    const store = new MetricStore();
    for (let step = 0; step < 10; step += 1) store.add("loss", 2, step, step);
    store.add("loss", 0, 8, 1);
    store.add("loss", 5, 12, 1);
    store.add("loss", 1, 3, 1);
    expectSame(store);
    expect(store.data("loss")).toHaveLength(5);
  });

  it("a new attempt reporting from an earlier step again keeps the first values, as the buffers do", () => {
    const store = new MetricStore();
    for (let step = 0; step <= 60; step += 1) for (const rank of [0, 1]) store.add("loss", rank, step, 1);
    // attempt 2 resumes from the checkpoint at step 40 on one rank: steps 41-60 again, then new ones
    for (let step = 41; step <= 80; step += 1) store.add("loss", 0, step, 2);
    expectSame(store);
    const [xs, r0, r1] = store.data("loss");
    expect(xs).toHaveLength(81);
    expect([r0![60], r0![61], r1![61]]).toEqual([1, 2, null]);
  });

  it("full buffers dropping their oldest points drop the rows no rank holds", () => {
    const store = new MetricStore(20);
    for (let step = 0; step < 100; step += 1) {
      store.add("loss", 0, step, step);
      if (step % 2 === 0) store.add("loss", 1, step, -step); // rank 1 holds older steps longer
      if (step % 7 === 0) expectSame(store);
    }
    expectSame(store);
    expect(store.data("loss")[0][0]).toBe(60); // rank 1's oldest of its 20 even steps
  });

  it("a row dropped in the middle (a late point keeps an older row alive) and a dead row held again", () => {
    const store = new MetricStore(5);
    for (const step of [1, 2, 3, 4, 5]) store.add("loss", 0, step, step);
    for (const step of [4, 5, 6, 7]) store.add("loss", 1, step, -step);
    store.add("loss", 1, 3, -3); // late: rank 1's newest-inserted row is its oldest step
    for (const step of [6, 7, 8, 9]) store.add("loss", 0, step, step); // rank 0 drops 1-4
    store.add("loss", 1, 8, -8); // rank 1 drops 4: row 4 dead, row 3 (held by rank 1) before it
    expectSame(store);
    store.add("loss", 0, 10, 10); // rank 0 drops 5
    store.add("loss", 1, 9, -9); // rank 1 drops 5: row 5 dead
    store.add("loss", 2, 5, 0.5); // and held again by a rank joining late, before any redraw
    expectSame(store);
    expect(store.data("loss")[0]).toEqual([3, 5, 6, 7, 8, 9, 10]);
  });

  it("equals a full alignment under random arrival: late ranks, reorders, duplicates, eviction", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const next = random(seed);
      const store = new MetricStore(40);
      const newest = new Map<number, number>();
      for (let i = 0; i < 2_000; i += 1) {
        const rank = Math.floor(next() * 6);
        const held = newest.get(rank) ?? Math.floor(next() * 30);
        // mostly the next step; sometimes a late one, a repeat, a jump
        const roll = next();
        const step = roll < 0.7 ? held + 1 : roll < 0.85 ? Math.max(0, held - Math.floor(next() * 50)) : roll < 0.95 ? held : held + 1 + Math.floor(next() * 5);
        newest.set(rank, Math.max(held, step));
        store.add("loss", rank, step, next() < 0.02 ? null as unknown as number : next());
        if (i % 37 === 0) expectSame(store);
      }
      expectSame(store);
    }
  });

  it("a reconnect's snapshot fills the gaps without duplicating what is held", () => {
    const store = new MetricStore();
    for (let step = 0; step < 30; step += 1) if (step < 10 || step > 20) for (const rank of [0, 1, 2]) store.add("loss", rank, step, step);
    const snapshot = { step: [] as number[], time: [] as number[], value: [] as number[], rank: [] as number[] };
    for (let step = 5; step < 30; step += 1) for (const rank of [2, 0, 1]) Object.entries({ step, time: step, value: step, rank }).forEach(([k, v]) => (snapshot[k as keyof typeof snapshot] as number[]).push(v));
    expect(store.applySnapshot({ loss: snapshot })).toEqual(new Set(["loss"]));
    expectSame(store);
    expect(store.data("loss")[0]).toHaveLength(30);
  });

  it("hands every redraw the same arrays (no copy per redraw)", () => {
    const store = new MetricStore();
    store.add("loss", 0, 1, 1);
    const first = store.data("loss");
    store.add("loss", 0, 2, 1);
    const second = store.data("loss");
    expect(second[0]).toBe(first[0]);
    expect(second[0]).toEqual([1, 2]);
  });
});
