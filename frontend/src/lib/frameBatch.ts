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
