import { describe, expect, it } from "vitest";
import type { AttemptDevices } from "../src/api/types";
import { deviceHistory, deviceKey, sensed, unionSlices, withLive } from "../src/lib/deviceHistory";
import type { AlignedData } from "../src/lib/series";

/** A CPU slot's samples at the given times: util t, memory 10·t. */
function device(node: string, index: number, times: number[]) {
  return {
    node,
    device: index,
    kind: "cpu",
    time: times,
    util: times.map((t) => t),
    mem_used: times.map((t) => 10 * t),
    temperature: times.map(() => null),
    power: times.map(() => null),
  };
}

// attempt 1 on slot 0 for [100, 120]; attempt 2 on slots 0 and 1 of node-a and slot 0 of node-b since 200
const restarted: AttemptDevices[] = [
  { attempt_id: 7, number: 1, start: 100, end: 120, devices: [device("node-a", 0, [100, 110, 120])] },
  { attempt_id: 9, number: 2, start: 200, end: null, devices: [device("node-a", 1, [200, 210]), device("node-a", 0, [200, 210]), device("node-b", 0, [205])] },
];

describe("deviceHistory", () => {
  it("draws every attempt from the job's start, a row of nulls between attempts", () => {
    const history = deviceHistory(restarted);
    expect(history.columns.get(deviceKey("node-a", 0))).toEqual([
      [100, 110, 120, 160, 200, 210],
      [100, 110, 120, null, 200, 210],
      [1000, 1100, 1200, null, 2000, 2100],
      [null, null, null, null, null, null],
      [null, null, null, null, null, null],
    ]);
    // a device only the second attempt held starts at its start
    expect(history.columns.get(deviceKey("node-a", 1))![0]).toEqual([200, 210]);
    expect(history.slices).toEqual([
      { node: "node-a", devices: [0, 1] },
      { node: "node-b", devices: [0] },
    ]);
    expect(history.spans).toEqual([
      { number: 1, start: 100, end: 120 },
      { number: 2, start: 200, end: null },
    ]);
    expect(history.liveSince).toBe(200);
    expect([...history.live].sort()).toEqual([deviceKey("node-a", 0), deviceKey("node-a", 1), deviceKey("node-b", 0)]);
    expect(history.kinds.get(deviceKey("node-b", 0))).toBe("cpu");
    expect(sensed(history, deviceKey("node-a", 0))).toBe(false);
  });

  it("has no live start once no attempt holds devices, and skips an attempt that never ran", () => {
    const ended = deviceHistory([{ ...restarted[0]! }, { attempt_id: 9, number: 2, start: null, end: null, devices: [] }]);
    expect(ended.liveSince).toBeNull();
    expect(ended.live.size).toBe(0);
    expect(ended.spans.map((s) => s.number)).toEqual([1]);
  });
});

describe("withLive", () => {
  const stored: AlignedData = [
    [100, 110],
    [1, 2],
    [10, 20],
    [null, 40],
    [null, 300],
  ];

  it("appends only the live rows after the stored ones, in the picked columns", () => {
    const live: AlignedData = [
      [105, 110, 115],
      [9, 9, 3],
      [90, 90, 30],
    ];
    expect(withLive(stored, [1, 2], live, 100)).toEqual([
      [100, 110, 115],
      [1, 2, 3],
      [10, 20, 30],
    ]);
    expect(withLive(stored, [3, 4], [[120], [50], [301]], 100)).toEqual([
      [100, 110, 120],
      [null, 40, 50],
      [null, 300, 301],
    ]);
  });

  it("breaks the line when the stored rows are an earlier attempt's", () => {
    expect(withLive(stored, [1, 2], [[200], [5], [50]], 190)).toEqual([
      [100, 110, 155, 200],
      [1, 2, null, 5],
      [10, 20, null, 50],
    ]);
  });

  it("is the live data alone without a history", () => {
    const live: AlignedData = [[1], [2], [3]];
    expect(withLive(undefined, [1, 2], live)).toBe(live);
  });
});

describe("unionSlices", () => {
  it("keeps the first list's order and adds the second's new devices", () => {
    expect(unionSlices([{ node: "a", devices: [0] }], [{ node: "a", devices: [1, 0] }, { node: "b", devices: [2] }])).toEqual([
      { node: "a", devices: [0, 1] },
      { node: "b", devices: [2] },
    ]);
  });
});
