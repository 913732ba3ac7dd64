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

  it("takes the data disk a heartbeat reports, and keeps the known one when it says nothing", () => {
    const low = { free: 1 << 20, total: 64 << 20, low: true, reason: "disk low (1 MiB free)" };
    const load = { cpu_percent: 1, cpus: 1, memory_used: 1, memory_total: 2 };
    const [full] = withHosts([node("a")], [{ node: "a", time: 1, ...load, disk: low }]);
    expect(full!.disk).toEqual(low);
    const [kept] = withHosts([full!], [{ node: "a", time: 2, ...load }]);
    expect(kept!.disk).toEqual(low);
    const [freed] = withHosts([full!], [{ node: "a", time: 3, ...load, disk: { ...low, free: 60 << 20, low: false, reason: null } }]);
    expect(freed!.disk?.low).toBe(false);
  });

  it("ignores heartbeats of nodes it does not list", () => {
    const a = node("a");
    expect(withHosts([a], [{ node: "zz", time: 1, cpu_percent: 1, cpus: 1, memory_used: 1, memory_total: 2 }])).toEqual([a]);
  });
});
