import { describe, expect, it } from "vitest";
import type { Job } from "../src/api/types";
import { attemptRanks, globalBatchText, resumeText, runShape, strategyText } from "../src/lib/runShape";

// a job trained on 2 devices (batch 32, no accumulation: global batch 64), resumed on 1
const resumed = {
  spec: { name: "j", template: "mlp", parallelism: { strategy: "data", devices: 1 }, grad_accum: 1, hyperparameters: { batch_size: 32 } },
  implications: { data_parallel_degree: 1, pipeline_stages: 1, global_batch: 32, bubble_fraction: 0, warnings: [] },
  placement: [{ node: "local", devices: [0] }],
  facts: { world_size: 1, data_parallel: 1, pipeline_stages: 1, batch_size: 32, accumulation: 2, global_batch: 64 },
} as unknown as Job;

describe("runShape", () => {
  it("states what the engine uses, not the spec recomputed on the new device count", () => {
    const shape = runShape(resumed);
    expect(shape.planned).toBe(false);
    expect(globalBatchText(shape)).toBe("64 = 32 × 2 accumulation × 1 replica");
    expect(strategyText(shape)).toBe("data · 1 device · dp 1 · stages 1");
  });

  it("before the engine reports, the spec's plan, marked planned", () => {
    const shape = runShape({ ...resumed, facts: null });
    expect(shape.planned).toBe(true);
    expect(globalBatchText(shape)).toBe("32 = 32 × 1 accumulation × 1 replica");
  });

  it("a script's batch is its own", () => {
    const script = { ...resumed, facts: null, implications: { ...resumed.implications, global_batch: null } } as unknown as Job;
    expect(globalBatchText(runShape(script))).toBe("—");
  });
});

describe("attemptRanks", () => {
  it("every rank of the attempt: its world size, else one per placed device", () => {
    expect(attemptRanks({ ...resumed, facts: { ...resumed.facts!, world_size: 4 } })).toEqual([0, 1, 2, 3]);
    const gang = { ...resumed, facts: null, placement: [{ node: "a", devices: [0, 1] }, { node: "b", devices: [0, 1] }] } as unknown as Job;
    expect(attemptRanks(gang)).toEqual([0, 1, 2, 3]);
    expect(attemptRanks({ ...resumed, facts: null, placement: [] })).toEqual([0]);
  });
});

describe("resumeText", () => {
  it("always names the device count it will use", () => {
    expect(resumeText(2, 2)).toBe("It resumes on 2 devices, as before.");
    expect(resumeText(1, 2)).toBe("It resumes on 1 device (was 2; the checkpoint is resharded and keeps its global batch).");
    expect(resumeText(Number(""), 2)).toBe("Enter a whole number of devices, 1 or more.");
    expect(resumeText(1.5, 2)).toBe("Enter a whole number of devices, 1 or more.");
  });
});
