import { describe, expect, it } from "vitest";
import { bubbleFraction, implications } from "../src/lib/implications";

const base = { strategy: "data" as const, devices: 4, pipelineStages: null, microbatches: 1, batchSize: 32, gradAccum: 2 };

describe("implications", () => {
  it("data parallel: every device is a replica", () => {
    const out = implications(base);
    expect(out.data_parallel_degree).toBe(4);
    expect(out.pipeline_stages).toBe(1);
    expect(out.global_batch).toBe(32 * 2 * 4);
    expect(out.bubble_fraction).toBe(0);
    expect(out.problems).toEqual([]);
    expect(out.warnings).toEqual([]);
  });

  it("model parallel: one stage per device, bubble (K-1)/(M+K-1)", () => {
    const out = implications({ ...base, strategy: "model", microbatches: 8 });
    expect(out.pipeline_stages).toBe(4);
    expect(out.data_parallel_degree).toBe(1);
    expect(out.global_batch).toBe(64);
    expect(out.bubble_fraction).toBeCloseTo(3 / 11);
    expect(out.warnings[0]).toContain("idles 27%");
  });

  it("hybrid: stages x replicas", () => {
    const out = implications({ ...base, strategy: "hybrid", devices: 8, pipelineStages: 2, microbatches: 8, gradAccum: 1 });
    expect(out.data_parallel_degree).toBe(4);
    expect(out.global_batch).toBe(128);
    expect(out.bubble_fraction).toBeCloseTo(1 / 9);
    expect(out.warnings).toEqual([]);
  });

  it("names the combinations the server refuses", () => {
    expect(implications({ ...base, microbatches: 2 }).problems[0]).toContain("microbatches applies");
    expect(implications({ ...base, strategy: "hybrid", devices: 4, pipelineStages: 4, microbatches: 4 }).problems[0]).toContain(
      "multiple (>= 2)",
    );
    expect(implications({ ...base, strategy: "model", devices: 1 }).problems[0]).toContain("at least 2 devices");
    expect(implications({ ...base, strategy: "model", microbatches: 5 }).problems).toContain(
      "batch_size (32) must split evenly into microbatches (5)",
    );
  });

  it("bubble fraction matches the formula", () => {
    expect(bubbleFraction(1, 1)).toBe(0);
    expect(bubbleFraction(4, 4)).toBeCloseTo(3 / 7);
  });

  it("global batch is unknown without a batch size", () => {
    expect(implications({ ...base, batchSize: null }).global_batch).toBeNull();
  });
});
