/**
 * Per-pixel min/max decimation of a live chart's aligned columns (issue #33). uPlot decimates
 * to the pixels itself, but it visits every point of every series on each redraw, and scans
 * every column for the y range: a chart of 8 ranks × 20,000 steps cost a long task per redraw
 * however few redraws there were. What uPlot gets instead:
 *
 * - the x range is cut into buckets `w` wide, `w` the largest power of two no wider than one
 *   pixel column (`bucketWidth`), bucket k holding the x in [k·w, (k+1)·w): at most two
 *   buckets a pixel, fixed while the span stays within a factor of two, so a bucket's rows
 *   never move as rows arrive;
 * - a bucket of at most 4 rows is drawn as it is; a larger one as 4 rows at real x of its own
 *   (its first, the ones a third and two thirds in, its last), each column's values there being
 *   its first, its min and max (in the order they occur) and its last value in the bucket. So
 *   every bucket keeps each column's first, last, min and max value — the line drawn covers
 *   the same pixels, to within the bucket's width (under a pixel) — and the y range, the first
 *   and the last point are the raw data's.
 *
 * `decimate` computes this from scratch; `Decimator` keeps it as rows arrive, rebuilding only
 * the buckets rows were added to (the newest, usually) or taken from (the oldest, as a full
 * ring buffer evicts), so a redraw costs O(pixels), not O(points). Tooltips and the chart's
 * text read the raw columns (`components/Chart.tsx`); a zoom decimates the raw rows in view
 * again (`decimateWindow`), so zooming in loses nothing.
 */
import { lowerBound, upperBound } from "./bisect";

/** uPlot's columns: x first, then one column per series (null where a series has no point). */
export type AlignedData = [number[], ...(number | null)[][]];

type Column = readonly (number | null)[];

/** The largest power of two no wider than one of `px` pixel columns over `span` (1 for an empty span). */
export function bucketWidth(span: number, px: number): number {
  if (!(span > 0) || !(px >= 1)) return 1;
  return 2 ** Math.floor(Math.log2(span / px));
}

/** Decimated rows being built: x, one column per value column, and each bucket's key, first step and first output row. */
class Out {
  readonly x: number[] = [];
  readonly ys: (number | null)[][];
  readonly keys: number[] = [];
  readonly steps: number[] = [];
  readonly starts: number[] = [];

  constructor(width: number) {
    this.ys = Array.from({ length: width }, () => []);
  }

  /**
   * Append the buckets of rows [from, to) (`keys`: each row's x, null rows skipped; `steps`: the
   * rows' locator, ascending). False when the keys do not ascend, or the first bucket would
   * repeat the key of the bucket before it.
   */
  emit(steps: readonly number[], keys: Column, cols: readonly Column[], from: number, to: number, w: number): boolean {
    let prevKey = this.keys.length ? this.keys[this.keys.length - 1]! : -Infinity;
    let prevX = this.x.length ? this.x[this.x.length - 1]! : -Infinity;
    let r = from;
    while (r < to) {
      const x = keys[r];
      if (x == null) {
        r += 1;
        continue;
      }
      const k = Math.floor(x / w);
      if (x < prevX || k <= prevKey) return false;
      // the bucket's rows: [first, last], less any without a key (`gaps`)
      const first = r;
      let last = r;
      let n = 0;
      let gaps = false;
      for (; r < to; r += 1) {
        const xr = keys[r];
        if (xr == null) {
          gaps = true;
          continue;
        }
        if (xr < prevX) return false;
        if (Math.floor(xr / w) !== k) break;
        last = r;
        n += 1;
        prevX = xr;
      }
      this.bucket(k, steps[first]!, keys, cols, first, last, n, gaps && n < last - first + 1);
      prevKey = k;
    }
    return true;
  }

  /** Copy buckets [from, to) of `src` (rows that did not change). */
  copy(src: Out, from: number, to: number): void {
    if (from >= to) return;
    const a = src.starts[from]!;
    const b = to < src.starts.length ? src.starts[to]! : src.x.length;
    const shift = this.x.length - a;
    for (let i = a; i < b; i += 1) this.x.push(src.x[i]!);
    this.ys.forEach((col, c) => {
      const s = src.ys[c]!;
      for (let i = a; i < b; i += 1) col.push(s[i]!);
    });
    for (let i = from; i < to; i += 1) {
      this.keys.push(src.keys[i]!);
      this.steps.push(src.steps[i]!);
      this.starts.push(src.starts[i]! + shift);
    }
  }

  data(): AlignedData {
    return [this.x, ...this.ys];
  }

  /**
   * One bucket: rows [first, last] (`n` with a key; `gaps`: some between have none). Up to 4 rows
   * as they are; more as 4 rows at x of its own (its first row's, the ones a third and two thirds
   * in, its last row's), each column's values there being its first, its min and max in the order
   * they occur, and its last.
   */
  private bucket(k: number, step: number, keys: Column, cols: readonly Column[], first: number, last: number, n: number, gaps: boolean): void {
    this.keys.push(k);
    this.steps.push(step);
    this.starts.push(this.x.length);
    const xs = this.x;
    const ys = this.ys;
    if (n <= 4) {
      for (let r = first; r <= last; r += 1) {
        const x = keys[r];
        if (x == null) continue;
        xs.push(x);
        for (let c = 0; c < cols.length; c += 1) ys[c]!.push(cols[c]![r] ?? null);
      }
      return;
    }
    if (gaps) {
      const rows: number[] = [];
      for (let r = first; r <= last; r += 1) if (keys[r] != null) rows.push(r);
      xs.push(keys[first]!, keys[rows[Math.floor(n / 3)]!]!, keys[rows[Math.floor((2 * n) / 3)]!]!, keys[last]!);
    } else xs.push(keys[first]!, keys[first + Math.floor(n / 3)]!, keys[first + Math.floor((2 * n) / 3)]!, keys[last]!);
    for (let c = 0; c < cols.length; c += 1) {
      const col = cols[c]!;
      let firstV: number | null = null;
      let lastV: number | null = null;
      let lo = Infinity;
      let hi = -Infinity;
      let loAt = -1;
      let hiAt = -1;
      for (let r = first; r <= last; r += 1) {
        const v = col[r];
        if (v == null || (gaps && keys[r] == null)) continue;
        firstV ??= v;
        lastV = v;
        if (v < lo) {
          lo = v;
          loAt = r;
        }
        if (v > hi) {
          hi = v;
          hiAt = r;
        }
      }
      const out = ys[c]!;
      if (firstV === null) out.push(null, null, null, null);
      else if (loAt < 0 || hiAt < 0) out.push(firstV, firstV, lastV, lastV); // only NaNs: nothing to order
      else if (loAt <= hiAt) out.push(firstV, lo, hi, lastV);
      else out.push(firstV, hi, lo, lastV);
    }
  }
}

/**
 * The decimation of rows [from, to) of aligned data for `px` pixel columns, from scratch: the
 * bucket width from the rows' x span (or `span`, when given: a zoom's width). x must ascend.
 */
export function decimate(data: AlignedData, px: number, from = 0, to = data[0].length, span?: number): AlignedData {
  const [xs, ...cols] = data;
  const out = new Out(cols.length);
  if (to > from) out.emit(xs, xs, cols, from, to, bucketWidth(span ?? xs[to - 1]! - xs[from]!, px));
  return out.data();
}

/**
 * What a chart zoomed to x in [lo, hi] draws: the raw rows in view decimated for the window's
 * own width, the raw row just outside each side (the lines run to the frame) and the first and
 * last raw rows (a double click's zoom-out finds the whole x range in the data).
 */
export function decimateWindow(data: AlignedData, lo: number, hi: number, px: number): AlignedData {
  const xs = data[0];
  const n = xs.length;
  const i0 = lowerBound(xs, lo);
  const i1 = upperBound(xs, hi);
  const inside = decimate(data, px, i0, i1, hi - lo);
  const before = [0, i0 - 1].filter((r, i, all) => r >= 0 && r < i0 && all.indexOf(r) === i);
  const after = [i1, n - 1].filter((r, i, all) => r >= i1 && r < n && all.indexOf(r) === i);
  return data.map((col, c) => [...before.map((r) => col[r]!), ...inside[c]!, ...after.map((r) => col[r]!)]) as AlignedData;
}

/**
 * `decimate` kept as rows arrive. The owner reports each row it adds a point to (`touched`,
 * with the row's step) and each step a full buffer evicts (`evicted`); `update` then rebuilds
 * the buckets from the oldest touched row to the end, and the leading buckets up to the newest
 * evicted step, and copies the rest. Rows are located by step (ascending); a bucket's x is each
 * row's key: the step itself, or its time (rows without a time are left out; keys that do not
 * ascend with the steps make `update` return null: the caller sorts, then `decimate`s).
 */
export class Decimator {
  private out = new Out(0);
  private w = Number.NaN;
  private px = Number.NaN;
  private valid = false;
  private tailFrom = Infinity;
  private frontTo = -Infinity;
  private cached: AlignedData | null = null;
  /** How many raw rows the last `update` read (what a redraw's decimation cost). */
  scanned = 0;

  /** A point was added to (or placed in) the row of `step`. */
  touched(step: number): void {
    if (step < this.tailFrom) this.tailFrom = step;
  }

  /** A point at `step` was taken out. */
  evicted(step: number): void {
    if (step > this.frontTo) this.frontTo = step;
  }

  /** The decimation of all rows for `px` pixel columns (the same as `decimate` of them), or null when the keys do not ascend. */
  update(steps: readonly number[], keys: Column, cols: readonly Column[], px: number): AlignedData | null {
    const n = steps.length;
    let f = 0;
    while (f < n && keys[f] == null) f += 1;
    let l = n - 1;
    while (l >= f && keys[l] == null) l -= 1;
    const w = f <= l ? bucketWidth(keys[l]! - keys[f]!, px) : 1;
    const clean = this.tailFrom === Infinity && this.frontTo === -Infinity;
    this.scanned = 0;
    if (this.valid && clean && w === this.w && px === this.px && this.cached && this.cached.length === cols.length + 1) return this.cached;
    let ok: boolean;
    if (!this.valid || w !== this.w || px !== this.px || this.out.ys.length !== cols.length) ok = this.full(steps, keys, cols, w);
    else ok = this.partial(steps, keys, cols, w) || this.full(steps, keys, cols, w);
    this.w = w;
    this.px = px;
    this.valid = ok;
    this.tailFrom = Infinity;
    this.frontTo = -Infinity;
    this.cached = ok ? this.out.data() : null;
    return this.cached;
  }

  private full(steps: readonly number[], keys: Column, cols: readonly Column[], w: number): boolean {
    this.out = new Out(cols.length);
    this.scanned += steps.length;
    return this.out.emit(steps, keys, cols, 0, steps.length, w);
  }

  /** Rebuild the dirty ends and copy the middle; false when they meet or the keys disagree (then a full rebuild). */
  private partial(steps: readonly number[], keys: Column, cols: readonly Column[], w: number): boolean {
    const old = this.out;
    const nb = old.keys.length;
    // buckets [0, front) lost rows; buckets from `tail` on gained (or had placed) some
    const front = this.frontTo === -Infinity ? 0 : upperBound(old.steps, this.frontTo);
    const tail = this.tailFrom === Infinity ? nb : Math.max(0, upperBound(old.steps, this.tailFrom) - 1);
    if (tail < front || front >= nb) return false;
    const out = new Out(cols.length);
    const middleRow = lowerBound(steps, old.steps[front]!);
    const tailRow = tail < nb ? lowerBound(steps, old.steps[tail]!) : steps.length;
    this.scanned += middleRow + steps.length - tailRow;
    if (!out.emit(steps, keys, cols, 0, middleRow, w)) return false;
    out.copy(old, front, tail);
    if (!out.emit(steps, keys, cols, tailRow, steps.length, w)) return false;
    this.out = out;
    return true;
  }
}
