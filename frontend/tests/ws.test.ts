import { describe, expect, it } from "vitest";
import { backoffDelay, WsClient, type SocketLike, type WsMessage } from "../src/api/ws";
import { MetricStore } from "../src/lib/series";

class FakeSocket implements SocketLike {
  readyState = 0;
  sent: unknown[] = [];
  onopen: ((ev: unknown) => void) | null = null;
  onclose: ((ev: { code: number }) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  send(data: string) {
    this.sent.push(JSON.parse(data));
  }
  close() {
    this.readyState = 3;
  }
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }
  drop(code = 1006) {
    this.readyState = 3;
    this.onclose?.({ code });
  }
  receive(message: WsMessage) {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}

function harness() {
  const sockets: FakeSocket[] = [];
  const timers: { fn: () => void; ms: number }[] = [];
  const statuses: string[] = [];
  let authFailures = 0;
  const client = new WsClient({
    url: "ws://test/api/ws",
    connect: () => {
      const s = new FakeSocket();
      sockets.push(s);
      return s;
    },
    baseDelayMs: 100,
    maxDelayMs: 1_000,
    random: () => 0.5,
    setTimer: (fn, ms) => timers.push({ fn, ms }),
    clearTimer: () => {},
    onRefused: () => (authFailures += 1),
  });
  client.onStatus((s) => statuses.push(s));
  return { client, sockets, timers, statuses, authFailures: () => authFailures };
}

describe("WsClient", () => {
  it("connects lazily and subscribes once the socket is open", () => {
    const { client, sockets } = harness();
    expect(sockets).toHaveLength(0);
    client.subscribe("jobs", () => {});
    expect(sockets).toHaveLength(1);
    sockets[0]!.open();
    expect(sockets[0]!.sent).toEqual([{ op: "subscribe", topic: "jobs" }]);
  });

  it("routes messages to the topic's handlers and unsubscribes when the last leaves", () => {
    const { client, sockets } = harness();
    const got: string[] = [];
    const a = client.subscribe("job:1", (m) => got.push(`a:${m.type}`));
    const b = client.subscribe("job:1", (m) => got.push(`b:${m.type}`));
    client.subscribe("cluster", (m) => got.push(`c:${m.type}`));
    const s = sockets[0]!;
    s.open();
    s.receive({ type: "snapshot", topic: "job:1", data: {} });
    expect(got).toEqual(["a:snapshot", "b:snapshot"]);
    a();
    expect(s.sent).not.toContainEqual({ op: "unsubscribe", topic: "job:1" });
    b();
    expect(s.sent).toContainEqual({ op: "unsubscribe", topic: "job:1" });
    s.receive({ type: "delta", topic: "job:1", data: {} });
    expect(got).toHaveLength(2);
  });

  it("reconnects with growing backoff and re-subscribes every topic", () => {
    const { client, sockets, timers, statuses } = harness();
    client.subscribe("jobs", () => {});
    client.subscribe("cluster", () => {});
    sockets[0]!.open();
    sockets[0]!.drop();
    expect(statuses.at(-1)).toBe("reconnecting");
    expect(timers.map((t) => t.ms)).toEqual([90]);
    timers[0]!.fn();
    sockets[1]!.drop(); // the server is still away
    timers[1]!.fn();
    sockets[2]!.drop();
    expect(timers.map((t) => t.ms)).toEqual([90, 180, 360]);
    timers[2]!.fn();
    sockets[3]!.open();
    expect(statuses.at(-1)).toBe("open");
    expect(sockets[3]!.sent).toEqual([
      { op: "subscribe", topic: "jobs" },
      { op: "subscribe", topic: "cluster" },
    ]);
    sockets[3]!.drop();
    expect(timers.at(-1)!.ms).toBe(90); // backoff resets after a good connection
  });

  it("reports a refused socket and stops after close()", () => {
    const h = harness();
    h.client.subscribe("jobs", () => {});
    h.sockets[0]!.open();
    h.sockets[0]!.drop(1006); // an ordinary drop after a good connection is not a refusal
    expect(h.authFailures()).toBe(0);
    h.timers[0]!.fn();
    h.sockets[1]!.drop(1006); // never opened: the handshake was refused
    expect(h.authFailures()).toBe(1);
    h.timers[1]!.fn();
    h.sockets[2]!.open();
    h.sockets[2]!.drop(4401);
    expect(h.authFailures()).toBe(2);
    h.client.close();
    expect(h.statuses.at(-1)).toBe("idle");
    h.timers[2]!.fn(); // a timer that fires late must not reconnect
    expect(h.sockets).toHaveLength(3);
  });

  it("re-subscribes the topics a resync names, and only those it holds", () => {
    const { client, sockets } = harness();
    client.subscribe("jobs", () => {});
    const s = sockets[0]!;
    s.open();
    s.sent.length = 0;
    s.onmessage?.({ data: JSON.stringify({ type: "resync", topics: ["jobs", "cluster"] }) });
    expect(s.sent).toEqual([{ op: "subscribe", topic: "jobs" }]);
  });

  it("caps the backoff", () => {
    expect(backoffDelay(20, 100, 1_000, () => 0.999)).toBeLessThanOrEqual(1_000);
    expect(backoffDelay(0, 100, 1_000, () => 0)).toBe(80);
  });

  it("a resync snapshot after reconnect refills the gap without duplicating points", () => {
    const { client, sockets, timers } = harness();
    const store = new MetricStore();
    client.subscribe("job:7", (m) => {
      const data = m.data as { metrics?: unknown };
      if (m.type === "snapshot") store.applySnapshot(data.metrics as never);
      else store.applyPoints(data.metrics as never);
    });
    const point = (step: number, rank = 0) => ({ attempt_id: 1, rank, step, name: "loss", value: 1 / step, time: step });
    sockets[0]!.open();
    sockets[0]!.receive({
      type: "snapshot",
      topic: "job:7",
      data: { metrics: { loss: { step: [1, 2], time: [1, 2], value: [1, 0.5], rank: [0, 0] } } },
    });
    sockets[0]!.receive({ type: "delta", topic: "job:7", data: { metrics: [point(3), point(3)] } });
    sockets[0]!.drop();
    timers[0]!.fn();
    sockets[1]!.open();
    // Steps 4 and 5 happened while away; the snapshot repeats 1-3 as well.
    sockets[1]!.receive({
      type: "snapshot",
      topic: "job:7",
      data: { metrics: { loss: { step: [1, 2, 3, 4, 5], time: [1, 2, 3, 4, 5], value: [1, 0.5, 1 / 3, 0.25, 0.2], rank: [0, 0, 0, 0, 0] } } },
    });
    // The hub may also deliver a delta it sent before the snapshot was read.
    sockets[1]!.receive({ type: "delta", topic: "job:7", data: { metrics: [point(5), point(6)] } });
    const [steps, values] = store.data("loss");
    expect(steps).toEqual([1, 2, 3, 4, 5, 6]);
    expect(values).toHaveLength(6);
  });

  it("resumes each topic from the last position it received", () => {
    const { client, sockets, timers } = harness();
    client.subscribe("job:7", () => {});
    client.subscribe("jobs", () => {});
    const s = sockets[0]!;
    s.open();
    s.receive({ type: "snapshot", topic: "job:7", pos: "100-0", data: {} });
    s.receive({ type: "delta", topic: "job:7", pos: "105-2", data: {} });
    s.receive({ type: "delta", topic: "job:7", data: {} }); // unpositioned: keeps the cursor
    s.receive({ type: "snapshot", topic: "jobs", data: { jobs: [] } });
    expect(client.cursor("job:7")).toBe("105-2");
    s.drop();
    timers[0]!.fn();
    sockets[1]!.open();
    expect(sockets[1]!.sent).toEqual([
      { op: "subscribe", topic: "job:7", since: "105-2" },
      { op: "subscribe", topic: "jobs" },
    ]);
  });

  it("forgets a cursor on resync and on unsubscribe, so those get fresh snapshots", () => {
    const { client, sockets } = harness();
    const leave = client.subscribe("cluster", () => {});
    client.subscribe("job:3", () => {});
    const s = sockets[0]!;
    s.open();
    s.receive({ type: "delta", topic: "cluster", pos: "9-0", data: {} });
    s.receive({ type: "delta", topic: "job:3", pos: "9-1", data: {} });
    s.sent.length = 0;
    s.onmessage?.({ data: JSON.stringify({ type: "resync", topics: ["job:3"] }) });
    expect(s.sent).toEqual([{ op: "subscribe", topic: "job:3" }]);
    expect(client.cursor("job:3")).toBeUndefined();
    leave();
    expect(client.cursor("cluster")).toBeUndefined();
    client.subscribe("cluster", () => {});
    expect(s.sent.at(-1)).toEqual({ op: "subscribe", topic: "cluster" });
  });

  it("ignores positions of topics it no longer holds", () => {
    const { client, sockets } = harness();
    client.subscribe("jobs", () => {});
    sockets[0]!.open();
    sockets[0]!.receive({ type: "delta", topic: "job:9", pos: "1-0", data: {} });
    expect(client.cursor("job:9")).toBeUndefined();
  });
});
