/**
 * The job page's live charts hand uPlot a per-pixel min/max decimation of their aligned columns
 * (`lib/decimate.ts`, issue #33): every bucket (at most a pixel wide) keeps each column's first,
 * last, min and max, so every raw value lies within the drawn curve less than a bucket from its
 * x; the store keeps it as points arrive, always equal to a decimation from scratch; a zoom
 * decimates the raw rows in view again.
 */
import { describe, expect, it } from "vitest";
import { random } from "./random";
import { bucketWidth, decimate, decimateWindow, Decimator } from "../src/lib/decimate";
import { MetricStore, type AlignedData } from "../src/lib/series";

/** Plain arrays, for toEqual. */
const plain = (data: AlignedData) => data.map((col) => [...col]);

/** A noisy loss per rank over `steps` steps, with a spike and ranks reporting a step or two apart. */
function noisy(steps: number, ranks: number, seed = 1): AlignedData {
  const next = random(seed);
  const xs = Array.from({ length: steps }, (_, i) => i);
  const cols = Array.from({ length: ranks }, (_, r) =>
    xs.map((x) => (x >= steps - (r % 3) ? null : x === 777 && r === 1 ? 1e6 : 5 * 0.999 ** x + next() - r)),
  );
  return [xs, ...cols];
}

/** Each column's values per bucket of width `w` (null values left out). */
function buckets(data: AlignedData, w: number, from = 0, to = data[0].length): Map<number, number[][]> {
  const out = new Map<number, number[][]>();
  for (let i = from; i < to; i += 1) {
    const k = Math.floor(data[0][i]! / w);
    if (!out.has(k)) out.set(k, data.slice(1).map(() => []));
    data.slice(1).forEach((col, c) => col[i] != null && out.get(k)![c]!.push(col[i]!));
  }
  return out;
}

/** Every bucket of `raw` keeps each column's first, last, min and max in `drawn`, and `drawn` invents no value. */
function expectKept(raw: AlignedData, drawn: AlignedData, w: number, from = 0, to = raw[0].length): void {
  const want = buckets(raw, w, from, to);
  const got = buckets(drawn, w);
  expect([...got.keys()]).toEqual([...want.keys()]);
  for (const [k, cols] of want) {
    cols.forEach((values, c) => {
      const kept = got.get(k)![c]!;
      if (values.length === 0) return expect(kept).toEqual([]);
      expect(kept[0]).toBe(values[0]);
      expect(kept[kept.length - 1]).toBe(values[values.length - 1]);
      expect(Math.min(...kept)).toBe(Math.min(...values));
      expect(Math.max(...kept)).toBe(Math.max(...values));
    });
  }
}

/**
 * What a reader sees is the raw curve's: every raw point of a column lies within what `drawn`
 * draws less than `w` (under a pixel) from its x — a drawn value at or below it and one at or
 * above it — and every drawn value is one of the column's raw values, less than `w` from its own x.
 */
function expectSameEnvelope(raw: AlignedData, drawn: AlignedData, w: number): void {
  const dx = drawn[0];
  for (let c = 1; c < raw.length; c += 1) {
    const at = new Map<number, number>(); // raw x -> raw value
    raw[0].forEach((x, i) => raw[c]![i] != null && at.set(x, raw[c]![i]!));
    const rawByX = [...at.entries()];
    let j0 = 0;
    rawByX.forEach(([x, v]) => {
      while (j0 < dx.length && dx[j0]! <= x - w) j0 += 1;
      let below = false;
      let above = false;
      for (let j = j0; j < dx.length && dx[j]! < x + w; j += 1) {
        const d = drawn[c]![j];
        if (d == null) continue;
        if (d <= v) below = true;
        if (d >= v) above = true;
      }
      if (!(below && above)) throw new Error(`column ${c}: raw ${v} at x ${x} not within the drawn curve`);
    });
    let i0 = 0;
    dx.forEach((x, j) => {
      const d = drawn[c]![j];
      if (d == null) return;
      while (i0 < rawByX.length && rawByX[i0]![0] <= x - w) i0 += 1;
      let near = false;
      for (let i = i0; i < rawByX.length && rawByX[i]![0] < x + w && !near; i += 1) near = rawByX[i]![1] === d;
      if (!near) throw new Error(`column ${c}: drawn ${d} at x ${x} is no raw value within ${w}`);
    });
  }
}

describe("per-pixel min/max decimation", () => {
  it("keeps every pixel column's min and max and the first and last point", () => {
    const raw = noisy(20_000, 8);
    const px = 600;
    const drawn = decimate(raw, px);
    const w = bucketWidth(19_999, px);
    expect(w).toBeLessThanOrEqual(19_999 / px); // a bucket is no wider than a pixel column
    expect(w).toBeGreaterThan(19_999 / px / 2);
    expectKept(raw, drawn, w);
    expectSameEnvelope(raw, drawn, w);
    expect(drawn[0][0]).toBe(0);
    expect(drawn[0][drawn[0].length - 1]).toBe(19_999);
    expect(drawn[0].every((x) => raw[0].includes(x))).toBe(true); // real x only
    expect(drawn[0].length).toBeLessThanOrEqual(4 * Math.ceil(19_999 / w + 1));
    expect(drawn[0].length).toBeLessThan(raw[0].length / 4);
    expect(Math.max(...(drawn[2] as number[]).filter((v) => v !== null))).toBe(1e6); // the spike stays
  });

  it("keeps each bucket's values in the order they occur, a gap wider than a bucket, and NaNs out of the min and max", () => {
    const next = random(5);
    const steps = 12_000;
    const px = 300;
    const xs = Array.from({ length: steps }, (_, i) => i);
    // rank 1: noise; rank 2: no points for steps 5,000-5,999 (a gap) and a NaN every 97th step
    const a = xs.map(() => next());
    const b = xs.map((x) => (x >= 5_000 && x < 6_000 ? null : x % 97 === 0 ? Number.NaN : next() * 2));
    const raw: AlignedData = [xs, a, b];
    const drawn = decimate(raw, px);
    const w = bucketWidth(steps - 1, px);
    expect(w).toBe(32);
    expect(drawn[0].every((x, i) => i === 0 || x > drawn[0][i - 1]!)).toBe(true); // x ascends
    const byBucket = (data: AlignedData, c: number) => {
      const out = new Map<number, (number | null)[]>();
      data[0].forEach((x, i) => {
        const k = Math.floor(x / w);
        if (!out.has(k)) out.set(k, []);
        out.get(k)!.push(data[c]![i]!);
      });
      return out;
    };
    const finite = (vs: (number | null)[]) => vs.filter((v): v is number => v != null && !Number.isNaN(v));
    for (const c of [1, 2]) {
      const rawBuckets = byBucket(raw, c);
      const drawnBuckets = byBucket(drawn, c);
      expect([...drawnBuckets.keys()]).toEqual([...rawBuckets.keys()]);
      for (const [k, rawValues] of rawBuckets) {
        const values = rawValues.filter((v) => v !== null);
        const kept = drawnBuckets.get(k)!.filter((v) => v !== null);
        // the drawn values (repeats merged) are the raw ones in the order they occur: a min before
        // its max stays before it, the first value first, the last last
        const merged = kept.filter((v, i) => i === 0 || !Object.is(v, kept[i - 1]));
        let at = 0;
        for (const v of merged) {
          while (at < values.length && !Object.is(values[at], v)) at += 1;
          expect(at, `column ${c} bucket ${k}: ${v} out of order or not a raw value`).toBeLessThan(values.length);
          at += 1;
        }
        if (values.length === 0) {
          expect(kept).toEqual([]); // a bucket inside the gap stays a gap
          continue;
        }
        expect(Object.is(kept[0], values[0]) && Object.is(kept[kept.length - 1], values[values.length - 1])).toBe(true);
        // the min and max are the finite values' (a NaN is never either); only NaNs: drawn as NaN
        const real = finite(values);
        if (real.length) {
          expect(Math.min(...finite(kept))).toBe(Math.min(...real));
          expect(Math.max(...finite(kept))).toBe(Math.max(...real));
        } else expect(kept.every((v) => Number.isNaN(v))).toBe(true);
      }
    }
    // the gap: every drawn row more than a bucket inside it has no value of rank 2; rank 1 has no gap
    const inGap = drawn[0].map((_, i) => i).filter((i) => drawn[0][i]! >= 5_000 + w && drawn[0][i]! < 6_000 - w);
    expect(inGap.length).toBeGreaterThan(100);
    expect(inGap.every((i) => drawn[2]![i] === null)).toBe(true);
    expect(drawn[1]!.every((v) => v !== null)).toBe(true);
    expect(drawn[2]!.some((v) => Number.isNaN(v))).toBe(true); // a bucket starting or ending on a NaN keeps it
  });

  it("keeps times that are not whole numbers in buckets of a pixel or less", () => {
    const next = random(9);
    const xs = Array.from({ length: 7_000 }, (_, i) => 1_700_000_000 + i * 0.37 + next() * 0.1);
    const raw: AlignedData = [xs, xs.map(() => next()), xs.map((_, i) => (i % 5 === 0 ? null : next() * 3))];
    const drawn = decimate(raw, 400);
    const w = bucketWidth(xs[xs.length - 1]! - xs[0]!, 400);
    expect(w).toBeLessThanOrEqual((xs[xs.length - 1]! - xs[0]!) / 400);
    expectKept(raw, drawn, w);
    expectSameEnvelope(raw, drawn, w);
  });

  it("draws few rows as they are", () => {
    const raw = noisy(300, 3);
    expect(plain(decimate(raw, 600))).toEqual(plain(raw));
  });

  it("re-decimates exactly from the raw rows on zoom", () => {
    const raw = noisy(20_000, 4, 7);
    const px = 500;
    const [lo, hi] = [700.5, 900];
    const zoomed = decimateWindow(raw, lo, hi, px);
    // in view: the rows 701..900 decimated for the window's own width (here: every row, 200 rows < 500 px)
    const inView = zoomed[0].map((x, i) => [x, i] as const).filter(([x]) => x >= lo && x <= hi);
    expect(inView.map(([x]) => x)).toEqual(raw[0].slice(701, 901));
    for (let c = 1; c < raw.length; c += 1) expect(inView.map(([, i]) => zoomed[c]![i])).toEqual(raw[c]!.slice(701, 901));
    // the whole decimation had far fewer rows there: zooming in loses nothing
    const whole = decimate(raw, px);
    expect(whole[0].filter((x) => x >= lo && x <= hi).length).toBeLessThan(200);
    // the row just outside each side (lines run to the frame), the first and the last row (a zoom out finds the range)
    expect(zoomed[0].slice(0, 2)).toEqual([0, 700]);
    expect(zoomed[0].slice(-2)).toEqual([901, 19_999]);
    // a wider window: decimated for its own width, every bucket's min and max kept
    const wide = decimateWindow(raw, 1000, 9000, px);
    const rows = wide[0].map((_, i) => i).filter((i) => wide[0][i]! >= 1000 && wide[0][i]! <= 9000);
    const inside = wide.map((col) => rows.map((i) => col[i]!)) as AlignedData;
    expect(plain(inside)).toEqual(plain(decimate(raw, px, 1000, 9001, 8000)));
    expectKept(raw, inside, bucketWidth(8000, px), 1000, 9001);
    expectSameEnvelope(raw.map((col) => col.slice(1000, 9001)) as AlignedData, inside, bucketWidth(8000, px));
  });
});

describe("kept as points arrive", () => {
  const px = 120;

  function expectFromScratch(store: MetricStore): void {
    expect(plain(store.drawn("loss", px))).toEqual(plain(decimate(store.data("loss"), px)));
    expect(plain(store.drawn("loss", px, "wall"))).toEqual(plain(decimate(store.data("loss", "wall"), px)));
  }

  it("equals a decimation from scratch as live ranks append and full buffers evict the oldest", () => {
    const store = new MetricStore(1000); // full after 1,000 steps: from then on every step evicts one
    const next = random(3);
    for (let step = 0; step < 3000; step += 1) {
      for (let rank = 0; rank < 8; rank += 1) {
        const s = step - (rank % 3); // ranks a step or two apart
        if (s >= 0) store.add("loss", rank, s, 5 * 0.999 ** s + next(), 1_700_000_000 + s * 0.05);
      }
      if (step % 37 === 0 || step > 2990) expectFromScratch(store);
    }
    expect(store.data("loss")[0][0]).toBeGreaterThan(1900);
  });

  it("equals it with late points, a rank joining late and a full buffer evicting", () => {
    const store = new MetricStore(500);
    const next = random(11);
    for (let round = 0; round < 60; round += 1) {
      for (let i = 0; i < 40; i += 1) {
        const rank = Math.floor(next() * (round < 20 ? 3 : 5)); // ranks 3 and 4 join late
        const step = round * 20 + Math.floor(next() * 60) - 30; // late and out-of-order steps
        if (step >= 0) store.add("loss", rank, step, next() * 10, 1_700_000_000 + step);
      }
      expectFromScratch(store);
    }
    expect(store.count("loss")).toBe(store.columns("loss").reduce((n, [xs]) => n + xs.length, 0));
  });

  it("reads only the rows added or evicted since the last redraw", () => {
    const [xs, ...cols] = noisy(20_000, 8) as [number[], ...(number | null)[][]];
    const decimator = new Decimator();
    decimator.update(xs, xs, cols, 600);
    expect(decimator.scanned).toBe(20_000);
    // a redraw later: ranks reported 21 steps, a full buffer evicted the 21 oldest
    for (let step = 20_000; step < 20_021; step += 1) {
      xs.push(step);
      cols.forEach((col) => col.push(Math.sin(step)));
      decimator.touched(step);
    }
    for (let step = 0; step < 21; step += 1) decimator.evicted(step);
    xs.splice(0, 21);
    cols.forEach((col) => col.splice(0, 21));
    const drawn = decimator.update(xs, xs, cols, 600)!;
    expect(plain(drawn)).toEqual(plain(decimate([xs, ...cols], 600)));
    const w = bucketWidth(xs[xs.length - 1]! - xs[0]!, 600);
    expect(decimator.scanned).toBeLessThanOrEqual(2 * w + 2 * 21); // the two end buckets and what changed
  });

  it("reads times that run back against the steps by sorting them", () => {
    const store = new MetricStore();
    for (let step = 0; step < 400; step += 1) store.add("loss", 0, step, step % 7, 1_700_000_000 + (step < 200 ? step + 1000 : step));
    expect(plain(store.drawn("loss", px, "wall"))).toEqual(plain(decimate(store.data("loss", "wall"), px)));
    expect(store.drawn("loss", px, "relative", 1_700_000_000)[0][0]).toBe(200);
  });
});
