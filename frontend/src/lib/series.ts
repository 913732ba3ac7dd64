/**
 * Live chart series with dedupe: metric points keyed (name, rank, step), device samples
 * keyed (node, device, time). A resync snapshot may repeat what is held; it adds only
 * what is missing, so series stay exact across reconnects.
 */
import type { DeviceSample, MetricPoint, SnapshotSeries } from "../api/types";
import { lowerBound, upperBound } from "./bisect";
import { Decimator, decimate, type AlignedData } from "./decimate";
import { RingBuffer } from "./ringbuffer";

export type { AlignedData };

/**
 * One x series with dedupe; a full buffer refuses points older than its window. While points
 * arrive in ascending x (a live series: every point but a late one), the dedupe searches the
 * buffer itself; a set of the xs held is built only once one arrives out of order. A set per
 * rank and metric churned by a full buffer's evictions grew its table to twice its size about
 * 13,000 points after the buffer filled: the job page's heap step (44 -> 58 MiB) at minute 26
 * of the 30-minute soak (issue #33).
 */
class KeyedSeries {
  readonly buffer: RingBuffer;
  /** The xs held, once the buffer is no longer sorted (null until then). */
  private seen: Set<number> | null = null;

  /** `evicted`: told of each x a full buffer pushes out. */
  constructor(capacity: number, width: number, evicted?: (x: number) => void) {
    this.buffer = new RingBuffer(capacity, width);
    this.buffer.onEvict = (x) => {
      this.seen?.delete(x);
      evicted?.(x);
    };
  }

  /** Whether a point at x is held. */
  private holds(x: number): boolean {
    if (this.seen) return this.seen.has(x);
    const b = this.buffer;
    return b.length > 0 && !(x > b.lastX()) && b.includes(x);
  }

  /** True when the point was new and stored. */
  add(x: number, ...values: (number | null)[]): boolean {
    if (this.holds(x)) return false;
    const full = this.buffer.length === this.buffer.capacity;
    if (full && x < this.buffer.firstX()) return false;
    this.seen?.add(x);
    this.buffer.push(x, ...values);
    if (!this.seen && !this.buffer.sorted) this.seen = new Set(this.buffer.columns(0)[0]);
    return true;
  }
}

/** Align several [xs, ys] tables on the union of their xs (gaps are null), like uPlot.join. */
export function alignSeries(tables: [number[], (number | null)[]][]): AlignedData {
  // The common case, ranks reporting the same steps: no union, sort or index needed.
  if (tables.length > 0 && tables.every(([x]) => sameXs(x, tables[0]![0]))) {
    return [tables[0]![0], ...tables.map(([, y]) => y)];
  }
  // Live ranks are a step or two apart at the newest end, so their xs differ there: merge the
  // ascending columns in one pass (a Set, a sort and a Map of every x on every redraw of a
  // long live chart was the job page's largest cost on a real stack, benchmarks.job_page_soak).
  if (tables.every(([x]) => ascending(x))) return mergeAscending(tables);
  const xs = [...new Set(tables.flatMap(([x]) => x))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const ys = tables.map(([tx, ty]) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    tx.forEach((x, i) => (col[index.get(x)!] = ty[i] ?? null));
    return col;
  });
  return [xs, ...ys];
}

function ascending(xs: number[]): boolean {
  for (let i = 1; i < xs.length; i += 1) if (!(xs[i]! > xs[i - 1]!)) return false;
  return true;
}

/** The union of strictly ascending xs in one pass, each table's ys placed at its xs. */
function mergeAscending(tables: [number[], (number | null)[]][]): AlignedData {
  const at = tables.map(() => 0);
  const xs: number[] = [];
  const ys = tables.map((): (number | null)[] => []);
  for (;;) {
    let next = 0;
    let found = false;
    for (let t = 0; t < tables.length; t += 1) {
      const tx = tables[t]![0];
      if (at[t]! < tx.length && (!found || tx[at[t]!]! < next)) {
        next = tx[at[t]!]!;
        found = true;
      }
    }
    if (!found) return [xs, ...ys];
    xs.push(next);
    for (let t = 0; t < tables.length; t += 1) {
      const [tx, ty] = tables[t]!;
      if (at[t]! < tx.length && tx[at[t]!] === next) {
        ys[t]!.push(ty[at[t]!] ?? null);
        at[t]! += 1;
      } else ys[t]!.push(null);
    }
  }
}

function sameXs(a: number[], b: number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * One metric's ranks aligned on their steps and kept between redraws (issue #33): each point is
 * placed as it arrives (appended when its step is the newest, the usual case; a late or
 * out-of-order one goes to its row, a row inserted for a step no rank had), each point a full
 * ring buffer evicts is taken out again, and `data()` hands the same columns to every redraw.
 * What it holds always equals `alignSeries` over the ranks' buffers (vitest `series`); copying
 * and re-aligning every rank's whole series on each redraw was the live page's largest cost.
 */
export class AlignedSteps {
  private readonly xs: number[] = [];
  private readonly cols: (number | null)[][] = [];
  /** Ranks in ascending order, one column each. */
  private readonly rankList: number[] = [];
  /** Per row, how many ranks hold a point at its x (a null value counts: its x is held). */
  private readonly holders: number[] = [];
  /** Per row, its time (unix s): the lowest rank's that reported one, or null. */
  private readonly times: (number | null)[] = [];
  /** Per row, the rank whose time `times` holds (Infinity: none yet). */
  private readonly timeRanks: number[] = [];
  /** Rows no rank holds any more, dropped by the next `data()`. */
  private dead = 0;
  /** The points held, all ranks together. */
  points = 0;
  /** The columns decimated for a chart by step, and by time (lib/decimate.ts), kept as points arrive. */
  private readonly bySteps = new Decimator();
  private readonly byTimes = new Decimator();

  add(rank: number, x: number, y: number | null, time: number | null = null): void {
    const col = this.column(rank);
    let row = this.xs.length - 1;
    if (row < 0 || x > this.xs[row]!) {
      this.xs.push(x);
      this.holders.push(0);
      this.times.push(null);
      this.timeRanks.push(Infinity);
      for (const c of this.cols) c.push(null);
      row += 1;
    } else {
      row = lowerBound(this.xs, x);
      if (this.xs[row] !== x) {
        this.xs.splice(row, 0, x);
        this.holders.splice(row, 0, 0);
        this.times.splice(row, 0, null);
        this.timeRanks.splice(row, 0, Infinity);
        for (const c of this.cols) c.splice(row, 0, null);
      } else if (this.holders[row] === 0) this.dead -= 1; // a dead row held again
    }
    col[row] = y;
    this.holders[row]! += 1;
    if (time !== null && rank < this.timeRanks[row]!) {
      this.times[row] = time;
      this.timeRanks[row] = rank;
    }
    this.points += 1;
    this.bySteps.touched(x);
    this.byTimes.touched(x);
  }

  /** A full buffer of `rank` pushed out its point at `x` (the row keeps its time while any rank holds it). */
  evict(rank: number, x: number): void {
    const row = lowerBound(this.xs, x);
    const at = lowerBound(this.rankList, rank);
    if (this.xs[row] !== x || this.rankList[at] !== rank) return;
    this.cols[at]![row] = null;
    this.holders[row]! -= 1;
    if (this.holders[row] === 0) this.dead += 1;
    this.points -= 1;
    this.bySteps.evicted(x);
    this.byTimes.evicted(x);
  }

  /** `[xs, one column per rank]`: the held arrays themselves, not copies (valid until the next add). */
  data(): AlignedData {
    if (this.dead > 0) this.compact();
    return [this.xs, ...this.cols];
  }

  /**
   * `[times, one column per rank]` of the rows with a time, ascending by time, each time
   * minus `shift`: what a chart by wall or relative time draws (copies).
   */
  byTime(shift = 0): AlignedData {
    if (this.dead > 0) this.compact();
    const rows: number[] = [];
    for (let r = 0; r < this.xs.length; r += 1) if (this.times[r] !== null) rows.push(r);
    // a resumed attempt repeats no step (points are keyed by step) but its times may interleave
    if (!rows.every((r, i) => i === 0 || this.times[r]! >= this.times[rows[i - 1]!]!)) rows.sort((a, b) => this.times[a]! - this.times[b]!);
    return [rows.map((r) => this.times[r]! - shift), ...this.cols.map((col) => rows.map((r) => col[r] ?? null))];
  }

  /**
   * The columns decimated for a chart `px` pixel columns wide (lib/decimate.ts), by step or by
   * time (unix s), kept between calls: equal to `decimate` over `data()` (or `byTime()`), at a
   * cost that grows with the rows added or evicted since the last call, not with the rows
   * held. By time: null when the rows' times do not ascend with their steps (sort, then decimate).
   */
  decimated(px: number, by: "step" | "time" = "step"): AlignedData | null {
    if (this.dead > 0) this.compact();
    if (by === "step") return this.bySteps.update(this.xs, this.xs, this.cols, px);
    return this.byTimes.update(this.xs, this.times, this.cols, px);
  }

  private column(rank: number): (number | null)[] {
    const at = lowerBound(this.rankList, rank);
    if (this.rankList[at] === rank) return this.cols[at]!;
    // a rank joining late: a column of gaps for the steps before it
    const col: (number | null)[] = new Array<number | null>(this.xs.length).fill(null);
    this.rankList.splice(at, 0, rank);
    this.cols.splice(at, 0, col);
    // every decimated bucket gains a column
    this.bySteps.touched(-Infinity);
    this.byTimes.touched(-Infinity);
    return col;
  }

  /** Drop the rows no rank holds: the oldest ones at once (what a full buffer evicts), else by filtering. */
  private compact(): void {
    const arrays: unknown[][] = [this.xs, this.holders, this.times, this.timeRanks, ...this.cols];
    let lead = 0;
    while (lead < this.holders.length && this.holders[lead] === 0) lead += 1;
    if (lead === this.dead) {
      for (const a of arrays) a.splice(0, lead);
    } else {
      let w = 0;
      for (let r = 0; r < this.holders.length; r += 1) {
        if (this.holders[r] === 0) continue;
        for (const a of arrays) a[w] = a[r];
        w += 1;
      }
      for (const a of arrays) a.length = w;
    }
    this.dead = 0;
  }
}

/** Count the drawn points (non-null y values) of aligned data. */
export function countPoints(data: AlignedData): number {
  // no copies: this runs on every redraw of a live chart
  let n = 0;
  for (let c = 1; c < data.length; c += 1) {
    const col = data[c] as (number | null)[];
    for (let i = 0; i < col.length; i += 1) if (col[i] !== null) n += 1;
  }
  return n;
}

/** All metrics of one job: name → rank → step-indexed series. */
export class MetricStore {
  private readonly series = new Map<string, Map<number, KeyedSeries>>();
  /** Each name's ranks aligned on their steps, kept up to date point by point. */
  private readonly aligned = new Map<string, AlignedSteps>();
  /** The highest step of any point held: the job's live progress between its job updates. */
  newestStep = 0;
  /** The time of the earliest point held (unix seconds), or null: "relative" time's origin. */
  firstTime: number | null = null;

  constructor(private readonly capacity = 20_000) {}

  names(): string[] {
    return [...this.series.keys()].sort();
  }

  ranks(name: string): number[] {
    return [...(this.series.get(name)?.keys() ?? [])].sort((a, b) => a - b);
  }

  /** Add one point (`time`: unix seconds, when known); false when (name, rank, step) is already held. */
  add(name: string, rank: number, step: number, value: number, time: number | null = null): boolean {
    let byRank = this.series.get(name);
    let aligned = this.aligned.get(name);
    if (!byRank || !aligned) {
      byRank = new Map();
      aligned = new AlignedSteps();
      this.series.set(name, byRank);
      this.aligned.set(name, aligned);
    }
    let s = byRank.get(rank);
    if (!s) {
      const steps = aligned;
      s = new KeyedSeries(this.capacity, 2, (x) => steps.evict(rank, x));
      byRank.set(rank, s);
    }
    if (step > this.newestStep) this.newestStep = step;
    const added = s.add(step, value, time);
    if (!added) return false;
    aligned.add(rank, step, value, time);
    if (time !== null && (this.firstTime === null || time < this.firstTime)) this.firstTime = time;
    return true;
  }

  /** A `job:<id>` snapshot's metrics; returns the names that changed. */
  applySnapshot(metrics: Record<string, SnapshotSeries>): Set<string> {
    const changed = new Set<string>();
    for (const [name, col] of Object.entries(metrics)) {
      col.step.forEach((step, i) => {
        if (this.add(name, col.rank?.[i] ?? 0, step, col.value[i]!, col.time?.[i] ?? null)) changed.add(name);
      });
    }
    return changed;
  }

  /** Delta points; returns the names that changed. */
  applyPoints(points: MetricPoint[]): Set<string> {
    const changed = new Set<string>();
    for (const p of points) if (this.add(p.name, p.rank, p.step, p.value, p.time ?? null)) changed.add(p.name);
    return changed;
  }

  /** The last `n` values of one rank's series, in step order (no copy of the series). */
  newest(name: string, rank: number, n: number): number[] {
    return this.series.get(name)?.get(rank)?.buffer.newest(n) ?? [];
  }

  /**
   * uPlot data for one metric, every point held: x, then one column per rank (ascending rank).
   * x is the step, or each step's time (the lowest rank's that reported one, kept while the row
   * is held) as unix seconds ("wall"), or seconds after `origin` ("relative"); steps without a
   * time are left out of a time axis. By step it is the columns kept aligned as points arrived
   * (the same arrays on every call); by time a copy.
   */
  data(name: string, x: "step" | "wall" | "relative" = "step", origin = 0): AlignedData {
    const aligned = this.aligned.get(name);
    if (!aligned) return [[]];
    if (x === "step") return aligned.data();
    return aligned.byTime(x === "relative" ? origin : 0);
  }

  /**
   * What a chart `px` pixel columns wide draws of `data(name, x, origin)`: its per-pixel
   * min/max decimation (lib/decimate.ts), kept as points arrive, so a redraw's cost does not
   * grow with the series.
   */
  drawn(name: string, px: number, x: "step" | "wall" | "relative" = "step", origin = 0): AlignedData {
    const aligned = this.aligned.get(name);
    if (!aligned) return [[]];
    if (x === "step") return aligned.decimated(px)!;
    const byTime = aligned.decimated(px, "time");
    // times out of step order (a clock stepped back between ranks or attempts): sort, then decimate
    if (!byTime) return decimate(aligned.byTime(x === "relative" ? origin : 0), px);
    if (x === "wall" || origin === 0) return byTime;
    return [byTime[0].map((t) => t - origin), ...byTime.slice(1)] as AlignedData;
  }

  /** How many points of `name` are held, all ranks together. */
  count(name: string): number {
    return this.aligned.get(name)?.points ?? 0;
  }

  /** Copies of each rank's buffer (ascending rank): `[steps, values, times]`, ascending by step. */
  columns(name: string): [number[], ...(number | null)[][]][] {
    const byRank = this.series.get(name);
    return this.ranks(name).map((rank) => byRank!.get(rank)!.buffer.columns());
  }
}

/** Device samples per (node, device): time → [util %, memory used bytes, temperature °C, power W]. */
export class DeviceStore {
  private readonly series = new Map<string, KeyedSeries>();
  private readonly latestSample = new Map<string, DeviceSample>();
  /** Devices that have reported a temperature or a power reading at least once. */
  private readonly sensing = new Set<string>();

  constructor(private readonly capacity = 3_600) {}

  private static key(node: string, device: number): string {
    return `${node}\u0000${device}`;
  }

  /** Add samples; returns the keys ("node\0device") that changed. */
  apply(samples: DeviceSample[]): Set<string> {
    const changed = new Set<string>();
    for (const s of samples) {
      const key = DeviceStore.key(s.node, s.device);
      let series = this.series.get(key);
      if (!series) {
        series = new KeyedSeries(this.capacity, 4);
        this.series.set(key, series);
      }
      const temperature = s.temperature ?? null;
      const power = s.power ?? null;
      if (series.add(s.time, s.util ?? null, s.mem_used ?? null, temperature, power)) {
        changed.add(key);
        if (temperature !== null || power !== null) this.sensing.add(key);
        const prev = this.latestSample.get(key);
        if (!prev || prev.time <= s.time) this.latestSample.set(key, s);
      }
    }
    return changed;
  }

  latest(node: string, device: number): DeviceSample | undefined {
    return this.latestSample.get(DeviceStore.key(node, device));
  }

  /** uPlot data: [times (unix s), util %, memory bytes]. */
  data(node: string, device: number): AlignedData {
    const columns = this.series.get(DeviceStore.key(node, device))?.buffer.columns();
    return columns ? [columns[0], columns[1]!, columns[2]!] : [[], [], []];
  }

  /** uPlot data: [times (unix s), temperature °C, power W] (null where a sample had none). */
  sensors(node: string, device: number): AlignedData {
    const columns = this.series.get(DeviceStore.key(node, device))?.buffer.columns();
    return columns ? [columns[0], columns[3]!, columns[4]!] : [[], [], []];
  }

  /** Whether the device has reported a temperature or power reading (GPUs do; CPU slots never). */
  hasSensors(node: string, device: number): boolean {
    return this.sensing.has(DeviceStore.key(node, device));
  }

  count(node: string, device: number): number {
    return this.series.get(DeviceStore.key(node, device))?.buffer.length ?? 0;
  }
}

/**
 * The rows of aligned data with `since` <= x <= `until` (either null: open), for x sorted
 * ascending: a job's device charts draw its own time on the devices, not a slot's earlier
 * load from other jobs.
 */
export function windowed(data: AlignedData, since: number | null, until: number | null = null): AlignedData {
  const xs = data[0];
  const first = since === null ? 0 : lowerBound(xs, since);
  const end = until === null ? xs.length : upperBound(xs, until);
  if (first === 0 && end === xs.length) return data;
  return data.map((col) => col.slice(first, end)) as AlignedData;
}


/** Exponential moving average (TensorBoard's smoothing weight in [0, 1)); gaps stay gaps. */
export function smooth(values: (number | null)[], weight: number): (number | null)[] {
  if (weight <= 0) return values;
  let last: number | null = null;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    last = last === null ? v : last * weight + (1 - weight) * v;
    return last;
  });
}

/** A snapshot's points of one rank (a board sparkline draws the job's loss-reporting rank). */
export function ofRank(metrics: Record<string, SnapshotSeries>, rank: number): Record<string, SnapshotSeries> {
  const out: Record<string, SnapshotSeries> = {};
  for (const [name, s] of Object.entries(metrics)) {
    const keep = s.step.map((_, i) => i).filter((i) => (s.rank?.[i] ?? 0) === rank);
    if (keep.length === 0) continue;
    out[name] = { step: keep.map((i) => s.step[i]!), time: keep.map((i) => s.time[i]!), value: keep.map((i) => s.value[i]!), rank: keep.map(() => rank) };
  }
  return out;
}
