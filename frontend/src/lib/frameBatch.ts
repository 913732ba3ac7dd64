/**
 * Coalesce work per animation frame: `add` merges an item into what is pending and asks for
 * one frame; the frame flushes everything that arrived since the last one in one call. A job
 * page fed 100 websocket messages a second renders at most once per frame, not per message.
 * Pending items wait while the tab is hidden (no frames), merged, and flush when it shows.
 */
export type Schedule = (run: () => void) => number;

export class FrameBatch<T> {
  private pending: T | undefined;
  private handle: number | null = null;

  constructor(
    private readonly merge: (held: T | undefined, incoming: T) => T,
    private readonly flush: (batch: T) => void,
    private readonly schedule: Schedule = (run) => requestAnimationFrame(run),
    private readonly cancel: (handle: number) => void = (handle) => cancelAnimationFrame(handle),
  ) {}

  add(item: T): void {
    this.pending = this.merge(this.pending, item);
    if (this.handle === null) this.handle = this.schedule(() => this.run());
  }

  /** Flush now (what a frame does). */
  run(): void {
    this.handle = null;
    const batch = this.pending;
    this.pending = undefined;
    if (batch !== undefined) this.flush(batch);
  }

  /** Drop what is pending (the page went away). */
  dispose(): void {
    if (this.handle !== null) this.cancel(this.handle);
    this.handle = null;
    this.pending = undefined;
  }
}

/** What a job page's websocket messages changed since the last frame. */
export interface JobChanges {
  /** Metric names that gained points. */
  names: Set<string>;
  /** Whether the log tail gained lines. */
  logs: boolean;
  /** Whether events arrived. */
  events: boolean;
}

export function mergeJobChanges(held: JobChanges | undefined, incoming: JobChanges): JobChanges {
  if (!held) return { names: new Set(incoming.names), logs: incoming.logs, events: incoming.events };
  incoming.names.forEach((n) => held.names.add(n));
  held.logs ||= incoming.logs;
  held.events ||= incoming.events;
  return held;
}

/**
 * One queue for the redraws of every live chart on a page (issue #33): at most one chart
 * redraws per animation frame, in the order they asked (a chart asking again while it waits
 * keeps its place), and after a redraw that cost c ms the next one, of any chart, begins no
 * sooner than `spacing` × c after it began. The charts together then keep the main thread busy
 * at most 1/`spacing` of the time however many there are and however fast the job reports;
 * each was paced alone before, so six charts of a job page could take 6/8 of it.
 *
 * A redraw's cost is measured when a microtask queued after it runs: uPlot draws in a
 * microtask that `setData` queues, so the cost includes the draw.
 */
export class RedrawQueue {
  private readonly waiting = new Set<() => void>();
  private handle: number | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The earliest time (`now()`) the next redraw may begin. */
  private nextAt = 0;
  /** A redraw began and its cost is not measured yet. */
  private drawing = false;

  constructor(
    readonly spacing: number,
    private readonly now: () => number = () => performance.now(),
    private readonly schedule: Schedule = (run) => requestAnimationFrame(run),
    private readonly cancelFrame: (handle: number) => void = (handle) => cancelAnimationFrame(handle),
    private readonly later: (run: () => void, ms: number) => ReturnType<typeof setTimeout> = (run, ms) => setTimeout(run, ms),
    private readonly afterTask: (run: () => void) => void = (run) => queueMicrotask(run),
  ) {}

  /** Ask for one redraw by `draw` (once, however often asked before it runs). */
  request(draw: () => void): void {
    this.waiting.add(draw);
    this.pump();
  }

  /** Forget `draw`'s pending redraw (its chart went away). */
  cancel(draw: () => void): void {
    this.waiting.delete(draw);
    if (this.waiting.size === 0) this.stop();
  }

  get pending(): number {
    return this.waiting.size;
  }

  /** Ask for the frame (or the timer before it) that runs the next redraw, unless one is asked. */
  private pump(): void {
    if (this.drawing || this.handle !== null || this.timer !== null || this.waiting.size === 0) return;
    const wait = this.nextAt - this.now();
    if (wait <= 0) this.handle = this.schedule(() => this.frame());
    else
      this.timer = this.later(() => {
        this.timer = null;
        this.pump();
      }, wait);
  }

  private frame(): void {
    this.handle = null;
    const [draw] = this.waiting;
    if (!draw) return;
    this.waiting.delete(draw);
    this.drawing = true;
    const began = this.now();
    try {
      draw();
    } finally {
      this.afterTask(() => {
        this.drawing = false;
        this.nextAt = began + (this.now() - began) * this.spacing;
        this.pump();
      });
    }
  }

  private stop(): void {
    if (this.handle !== null) this.cancelFrame(this.handle);
    if (this.timer !== null) clearTimeout(this.timer);
    this.handle = null;
    this.timer = null;
  }
}

/**
 * Builds of things mounted together (a page's charts), one per frame, in the order asked: the
 * first asked in a task runs at once, each other one in a task of its own after the next frame
 * (`afterFrame`: a frame callback, then a task), so the browser paints between them. Charts
 * built together in one commit's layout effects kept the first paint back until every one was
 * drawn (issue #34).
 */
export class BuildQueue {
  private readonly waiting: (() => void)[] = [];
  private builtInTask = false;
  private scheduled = false;

  constructor(
    private readonly afterFrame: (run: () => void) => void = (run) => requestAnimationFrame(() => setTimeout(run)),
    private readonly afterTask: (run: () => void) => void = (run) => queueMicrotask(run),
  ) {}

  /** Run `build` now (the first of this task, none waiting) or after the next frame; returns a cancel. */
  add(build: () => void): () => void {
    if (!this.builtInTask && this.waiting.length === 0) {
      this.builtInTask = true;
      this.afterTask(() => (this.builtInTask = false)); // after the other layout effects of this commit
      build();
      return () => undefined;
    }
    this.waiting.push(build);
    this.pump();
    return () => {
      const at = this.waiting.indexOf(build);
      if (at >= 0) this.waiting.splice(at, 1);
    };
  }

  get pending(): number {
    return this.waiting.length;
  }

  private pump(): void {
    if (this.scheduled || this.waiting.length === 0) return;
    this.scheduled = true;
    this.afterFrame(() => {
      this.scheduled = false;
      const build = this.waiting.shift();
      try {
        build?.();
      } finally {
        this.pump();
      }
    });
  }
}

/**
 * A trailing throttle: `run()` calls `fn` at once when it last ran `ms` ago or more, else once
 * when that much time has passed (calls in between fold into that one). `ms` may be a function,
 * read at each call (a pane out of view re-renders less often). The job page's log pane
 * and progress re-render this way, a few times a second, instead of on every frame.
 */
export function throttle(
  fn: () => void,
  ms: number | (() => number),
  now: () => number = () => performance.now(),
  later: (run: () => void, ms: number) => ReturnType<typeof setTimeout> = (run, wait) => setTimeout(run, wait),
): { run: () => void; dispose: () => void } {
  let last = -Infinity;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const fire = () => {
    timer = null;
    last = now();
    fn();
  };
  return {
    run: () => {
      if (timer !== null) return;
      const wait = last + (typeof ms === "number" ? ms : ms()) - now();
      if (wait <= 0) fire();
      else timer = later(fire, wait);
    },
    dispose: () => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
