import { describe, expect, it } from "vitest";
import { RingBuffer } from "../src/lib/ringbuffer";

describe("RingBuffer", () => {
  it("returns appended rows as columns in x order", () => {
    const rb = new RingBuffer(4, 2);
    rb.push(1, 10, 100);
    rb.push(2, 20, null);
    expect(rb.length).toBe(2);
    expect(rb.columns()).toEqual([[1, 2], [10, 20], [100, null]]);
  });

  it("keeps only the newest `capacity` rows and reports evictions", () => {
    const rb = new RingBuffer(3);
    const evicted: number[] = [];
    rb.onEvict = (x) => evicted.push(x);
    for (let x = 1; x <= 5; x += 1) rb.push(x, x * 10);
    expect(rb.length).toBe(3);
    expect(rb.columns()).toEqual([[3, 4, 5], [30, 40, 50]]);
    expect(evicted).toEqual([1, 2]);
    expect(rb.firstX()).toBe(3);
    expect(rb.lastX()).toBe(5);
  });

  it("sorts rows that arrived out of order", () => {
    const rb = new RingBuffer(5);
    rb.push(1, 1);
    rb.push(3, 3);
    rb.push(2, 2);
    expect(rb.columns()).toEqual([[1, 2, 3], [1, 2, 3]]);
  });

  it("finds an x by binary search across the wrap while rows arrived in order", () => {
    const rb = new RingBuffer(4);
    for (const x of [1, 3, 5, 7, 9, 11]) rb.push(x, x); // wrapped: holds 5, 7, 9, 11
    expect(rb.sorted).toBe(true);
    expect([4, 5, 7, 8, 9, 11, 12, 1, 3].map((x) => rb.includes(x))).toEqual([false, true, true, false, true, true, false, false, false]);
    rb.push(6, 6); // late: no longer sorted, so no search
    expect(rb.sorted).toBe(false);
    expect(() => rb.includes(6)).toThrow();
  });

  it("refuses a bad capacity and a wrong row width", () => {
    expect(() => new RingBuffer(0)).toThrow();
    expect(() => new RingBuffer(2, 2).push(1, 1)).toThrow();
  });

  it("clears", () => {
    const rb = new RingBuffer(2);
    rb.push(1, 1);
    rb.clear();
    expect(rb.columns()).toEqual([[], []]);
    expect(rb.lastX()).toBeNaN();
  });
});
