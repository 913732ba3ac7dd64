import { describe, expect, it } from "vitest";
import type { Node } from "../src/api/types";
import { withHosts } from "../src/lib/stores";

const node = (name: string): Node => ({
  name,
  hostname: "h",
  address: "127.0.0.1",
  state: "up",
  drained: false,
  incarnation: 0,
  last_heartbeat: "2026-11-22T20:00:00Z",
  host: null,
  devices: [],
});

describe("withHosts", () => {
  it("applies each node's newest heartbeat load and time, leaving other nodes alone", () => {
    const a = node("a");
    const b = node("b");
    const load = { cpu_percent: 12.5, cpus: 2, memory_used: 1024, memory_total: 4096 };
    const [gotA, gotB] = withHosts([a, b], [
      { node: "a", time: 1_800_000_000, ...load, cpu_percent: 3 },
      { node: "a", time: 1_800_000_002, ...load },
    ]);
    expect(gotA!.host).toEqual(load);
    expect(gotA!.last_heartbeat).toBe(new Date(1_800_000_002_000).toISOString());
    expect(gotB).toBe(b);
  });

  it("ignores heartbeats of nodes it does not list", () => {
    const a = node("a");
    expect(withHosts([a], [{ node: "zz", time: 1, cpu_percent: 1, cpus: 1, memory_used: 1, memory_total: 2 }])).toEqual([a]);
  });
});
