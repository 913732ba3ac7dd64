/**
 * Fixed-capacity columnar ring buffer for chart series: x plus N value columns.
 *
 * Appends are O(1); when full the oldest row is overwritten. `columns()` returns
 * linear arrays in x order, ready for uPlot's `[xs, ys1, ys2, ...]` data layout.
 */
export class RingBuffer {
  readonly capacity: number;
  private readonly cols: Float64Array[];
  private start = 0;
  private count = 0;
  /** Set when a row arrived with x below the newest x; `columns()` then sorts. */
  private unsorted = false;
  /** Called with the x of each row pushed out by a full buffer (to drop dedupe keys). */
  onEvict?: (x: number) => void;

  constructor(capacity: number, width = 1) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error("capacity must be >= 1");
    this.capacity = capacity;
    this.cols = Array.from({ length: width + 1 }, () => new Float64Array(capacity));
  }

  get length(): number {
    return this.count;
  }

  /** The column count besides x. */
  get width(): number {
    return this.cols.length - 1;
  }

  /** Append one row; `null` values are stored as NaN and come back as null (a gap). */
  push(x: number, ...values: (number | null)[]): void {
    if (values.length !== this.width) throw new Error(`expected ${this.width} values`);
    if (this.count > 0 && x < this.lastX()) this.unsorted = true;
    let slot: number;
    if (this.count < this.capacity) {
      slot = (this.start + this.count) % this.capacity;
      this.count += 1;
    } else {
      slot = this.start;
      if (this.onEvict) this.onEvict(this.cols[0]![slot]!);
      this.start = (this.start + 1) % this.capacity;
    }
    this.cols[0]![slot] = x;
    for (let i = 0; i < values.length; i += 1) this.cols[i + 1]![slot] = values[i] ?? Number.NaN;
  }

  /** Whether every row arrived in ascending x (ties allowed): `includes` then searches. */
  get sorted(): boolean {
    return !this.unsorted;
  }

  /** Whether a row has this x, by binary search: only while `sorted` (throws otherwise). */
  includes(x: number): boolean {
    if (this.unsorted) throw new Error("includes() needs rows in ascending x");
    const xs = this.cols[0]!;
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (xs[(this.start + mid) % this.capacity]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.count && xs[(this.start + lo) % this.capacity] === x;
  }

  /** The newest x, or NaN when empty. */
  lastX(): number {
    if (this.count === 0) return Number.NaN;
    return this.cols[0]![(this.start + this.count - 1) % this.capacity]!;
  }

  /** The oldest-inserted x (the smallest while rows arrive in order), or NaN when empty. */
  firstX(): number {
    return this.count === 0 ? Number.NaN : this.cols[0]![this.start]!;
  }

  /**
   * The last `n` non-gap values of value column `col` (1-based, as in `columns()`), in x
   * order, without copying the buffer: O(n) while rows arrived in order.
   */
  newest(n: number, col = 1): number[] {
    if (this.unsorted) {
      const values = this.columns()[col] as (number | null)[];
      return values.filter((v): v is number => v !== null).slice(-n);
    }
    const column = this.cols[col]!;
    const out: number[] = [];
    for (let i = this.count - 1; i >= 0 && out.length < n; i -= 1) {
      const v = column[(this.start + i) % this.capacity]!;
      if (!Number.isNaN(v)) out.push(v);
    }
    return out.reverse();
  }

  clear(): void {
    this.start = 0;
    this.count = 0;
    this.unsorted = false;
  }

  /** Linear copies of the columns, ascending by x: `[xs, ys1, ...]`; the first `width` value columns only when given (a chart by step copies no times). */
  columns(width = this.width): [number[], ...(number | null)[][]] {
    const rows: number[] = Array.from({ length: this.count }, (_, i) => (this.start + i) % this.capacity);
    if (this.unsorted) rows.sort((a, b) => this.cols[0]![a]! - this.cols[0]![b]!);
    const xs = rows.map((slot) => this.cols[0]![slot]!);
    const ys = this.cols.slice(1, 1 + width).map((col) =>
      rows.map((slot) => {
        const v = col[slot]!;
        return Number.isNaN(v) ? null : v;
      }),
    );
    return [xs, ...ys];
  }
}
