import { describe, expect, it } from "vitest";
import { readImplications } from "../src/lib/implications";

describe("readImplications (a job's implications as the server computed them)", () => {
  it("keeps the server's numbers and warnings", () => {
    const raw = { data_parallel_degree: 2, pipeline_stages: 2, global_batch: 128, bubble_fraction: 0.2, warnings: ["idles"] };
    expect(readImplications(raw)).toEqual(raw);
  });

  it("reads a missing or malformed field as its neutral value", () => {
    expect(readImplications({ data_parallel_degree: "x", global_batch: null, warnings: [1, "w"] })).toEqual({
      data_parallel_degree: 1,
      pipeline_stages: 1,
      global_batch: null,
      bubble_fraction: 0,
      warnings: ["w"],
    });
  });
});
