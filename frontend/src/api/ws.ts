/**
 * One websocket to /api/ws shared by every view: per-topic subscribe/unsubscribe,
 * reconnect with exponential backoff, and re-subscribe on reconnect. Positioned messages
 * (`pos`) are remembered per topic; a re-subscribe sends `since` so the server replays only
 * what was missed (or sends a fresh snapshot when it cannot). The stores' dedupe keeps series
 * exact either way.
 */

export type ConnStatus = "idle" | "connecting" | "open" | "reconnecting";

export interface WsMessage<T = unknown> {
  type: "snapshot" | "delta";
  topic: string;
  /** The live-stream position of this message (a resume cursor), when it has one. */
  pos?: string;
  data: T;
}

export type Handler = (message: WsMessage) => void;

/** Server messages that are not topic data: a backlog reset, or a refused request. */
type ServerNotice =
  | { type: "resync"; topics?: string[] }
  | { type: "error"; topic?: string; message?: string };

/** The part of the browser WebSocket the client uses (tests pass a fake). */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number }) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

export interface WsOptions {
  url: string;
  connect?: (url: string) => SocketLike;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Jitter source in [0, 1); deterministic in tests. */
  random?: () => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  /**
   * Called when the socket was refused: closed with 4401/4403/1008, or closed before it ever
   * opened (a handshake the server rejects reaches the browser as a bare 1006).
   */
  onRefused?: () => void;
}

const OPEN = 1;
const AUTH_CLOSE_CODES = new Set([4401, 4403, 1008]);

/** Delay before reconnect attempt `n` (0-based): base·2ⁿ capped, with up to 20% jitter. */
export function backoffDelay(n: number, baseMs: number, maxMs: number, random: () => number): number {
  const exp = Math.min(maxMs, baseMs * 2 ** n);
  return Math.round(exp * (0.8 + 0.2 * random()));
}

export class WsClient {
  private socket: SocketLike | null = null;
  private readonly handlers = new Map<string, Set<Handler>>();
  /** topic → the newest `pos` received: the `since` of a re-subscribe. */
  private readonly cursors = new Map<string, string>();
  private readonly statusListeners = new Set<(s: ConnStatus) => void>();
  private failures = 0;
  private timer: unknown = null;
  private closed = false;
  private current: ConnStatus = "idle";
  private readonly opts: Required<Omit<WsOptions, "onRefused">> & Pick<WsOptions, "onRefused">;

  constructor(options: WsOptions) {
    this.opts = {
      connect: (url) => new WebSocket(url) as unknown as SocketLike,
      baseDelayMs: 500,
      maxDelayMs: 15_000,
      random: Math.random,
      setTimer: (fn, ms) => setTimeout(fn, ms),
      clearTimer: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
      ...options,
    };
  }

  get status(): ConnStatus {
    return this.current;
  }

  get topics(): string[] {
    return [...this.handlers.keys()];
  }

  /** Listen to connection status changes; returns the unsubscribe function. */
  onStatus(listener: (s: ConnStatus) => void): () => void {
    this.statusListeners.add(listener);
    listener(this.current);
    return () => this.statusListeners.delete(listener);
  }

  /** Receive a topic's snapshot and deltas; the last handler leaving unsubscribes. */
  subscribe(topic: string, handler: Handler): () => void {
    let set = this.handlers.get(topic);
    if (!set) {
      set = new Set();
      this.handlers.set(topic, set);
      this.send({ op: "subscribe", topic });
    }
    set.add(handler);
    this.ensureConnected();
    return () => {
      const handlers = this.handlers.get(topic);
      if (!handlers?.delete(handler) || handlers.size > 0) return;
      this.handlers.delete(topic);
      this.cursors.delete(topic);
      this.send({ op: "unsubscribe", topic });
    };
  }

  /** Close for good (logout): no reconnects. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) this.opts.clearTimer(this.timer);
    this.timer = null;
    const socket = this.socket;
    this.socket = null;
    socket?.close(1000, "bye");
    this.setStatus("idle");
  }

  /** Allow connecting again after `close()` (a new login). */
  reopen(): void {
    this.closed = false;
    this.failures = 0;
    if (this.handlers.size > 0) this.ensureConnected();
  }

  private ensureConnected(): void {
    if (this.closed || this.socket || this.timer !== null) return;
    this.open();
  }

  private open(): void {
    this.timer = null;
    if (this.closed) return;
    this.setStatus(this.failures > 0 ? "reconnecting" : "connecting");
    const socket = this.opts.connect(this.opts.url);
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      opened = true;
      this.failures = 0;
      this.setStatus("open");
      for (const topic of this.handlers.keys()) this.resubscribe(topic);
    };
    socket.onmessage = (ev) => {
      if (this.socket !== socket) return;
      this.dispatch(ev.data);
    };
    socket.onerror = () => {};
    socket.onclose = (ev) => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (this.closed) return;
      if (!opened || AUTH_CLOSE_CODES.has(ev.code)) this.opts.onRefused?.();
      const delay = backoffDelay(this.failures, this.opts.baseDelayMs, this.opts.maxDelayMs, this.opts.random);
      this.failures += 1;
      this.setStatus("reconnecting");
      this.timer = this.opts.setTimer(() => this.open(), delay);
    };
  }

  private dispatch(raw: unknown): void {
    if (typeof raw !== "string") return;
    let message: WsMessage | ServerNotice;
    try {
      message = JSON.parse(raw) as WsMessage | ServerNotice;
    } catch {
      return;
    }
    if (message.type === "resync") {
      // The server dropped our backlog: a fresh snapshot per topic (no cursor, so no replay
      // of a backlog that just overflowed).
      for (const topic of message.topics ?? []) {
        this.cursors.delete(topic);
        if (this.handlers.has(topic)) this.send({ op: "subscribe", topic });
      }
      return;
    }
    if (message.type === "error") {
      console.warn("websocket:", message.topic ?? "", message.message);
      return;
    }
    if (message.type !== "snapshot" && message.type !== "delta") return;
    if (!this.handlers.has(message.topic)) return;
    if (typeof message.pos === "string") this.cursors.set(message.topic, message.pos);
    for (const handler of this.handlers.get(message.topic) ?? []) handler(message);
  }

  /** The resume cursor of a topic (the last `pos` received), if any. */
  cursor(topic: string): string | undefined {
    return this.cursors.get(topic);
  }

  /** Subscribe again after a reconnect, resuming from the topic's cursor when there is one. */
  private resubscribe(topic: string): void {
    const since = this.cursors.get(topic);
    this.send(since === undefined ? { op: "subscribe", topic } : { op: "subscribe", topic, since });
  }

  private send(payload: { op: "subscribe" | "unsubscribe"; topic: string; since?: string }): void {
    if (this.socket?.readyState === OPEN) this.socket.send(JSON.stringify(payload));
  }

  private setStatus(status: ConnStatus): void {
    if (status === this.current) return;
    this.current = status;
    for (const listener of this.statusListeners) listener(status);
  }
}

/** The app's shared client: ws(s)://<this origin>/api/ws. */
export function defaultWsUrl(loc: Location = window.location): string {
  return `${loc.protocol === "https:" ? "wss" : "ws"}://${loc.host}/api/ws`;
}
