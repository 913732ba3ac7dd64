/** The app's one websocket and a hook to follow a topic with it. */
import { useEffect, useRef, useState } from "preact/hooks";
import { client } from "./api/http";
import { defaultWsUrl, WsClient, type ConnStatus, type WsMessage } from "./api/ws";

export const live = new WsClient({
  url: defaultWsUrl(),
  // The socket was refused for credentials: ask /api/me, whose 401 routes to login.
  onRefused: () => void client.GET("/api/me").catch(() => {}),
});

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
