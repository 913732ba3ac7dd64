/** The app's one websocket and a hook to follow a topic with it. */
import { useEffect, useRef, useState } from "preact/hooks";
import { client } from "./api/http";
import { defaultWsUrl, WsClient, type ConnStatus, type WsMessage } from "./api/ws";

/**
 * The longest wait between two reconnects. Trying a socket to an API that is down costs a
 * refused TCP connect, so the back-off stays short: a page is back within ~1.5 s of the API
 * answering again (#33 item 8; 15 s had grown to ~11 s after a 14 s outage).
 */
export const RECONNECT_MAX_MS = 1_500;

export const live = new WsClient({
  url: defaultWsUrl(),
  baseDelayMs: 250,
  maxDelayMs: RECONNECT_MAX_MS,
  // The socket was refused for credentials: ask /api/me, whose 401 routes to login.
  onRefused: () => void client.GET("/api/me").catch(() => {}),
});

/** Reconnect now rather than at the end of the current back-off (a "retry now" control). */
export function retryNow(): void {
  if (live.status !== "reconnecting") return;
  live.close(); // drops the pending timer; reopen() connects at once, with the back-off reset
  live.reopen();
}

/** Follow a topic for the component's lifetime; the handler may change between renders. */
export function useTopic(topic: string | null, handler: (message: WsMessage) => void): void {
  const ref = useRef(handler);
  ref.current = handler;
  useEffect(() => {
    if (!topic) return;
    return live.subscribe(topic, (m) => ref.current(m));
  }, [topic]);
}

export function useConnStatus(): ConnStatus {
  const [status, setStatus] = useState<ConnStatus>(live.status);
  useEffect(() => live.onStatus(setStatus), []);
  return status;
}

/** A change signal for stores mutated outside Preact state (charts listen without re-rendering). */
export class Signal<T> {
  private readonly listeners = new Set<(value: T) => void>();
  on(fn: (value: T) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
  emit(value: T): void {
    this.listeners.forEach((fn) => fn(value));
  }
}
