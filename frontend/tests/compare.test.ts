import { describe, expect, it } from "vitest";
import { alignCurves, flatten, lowerIsBetter, smooth, specDiff, summarize, toCsv } from "../src/lib/compare";

const spec = (lr: number, devices = 2) => ({
  name: `run-${lr}`,
  template: "mlp",
  parallelism: { strategy: "data", devices },
  hyperparameters: { lr, steps: 100 },
  tags: ["a"],
});

describe("compare", () => {
  it("flattens nested specs to dotted keys", () => {
    expect(flatten(spec(0.1))).toEqual({
      name: "run-0.1",
      template: "mlp",
      "parallelism.strategy": "data",
      "parallelism.devices": 2,
      "hyperparameters.lr": 0.1,
      "hyperparameters.steps": 100,
      tags: ["a"],
    });
  });

  it("lists differing settings first; names never count as a difference", () => {
    const rows = specDiff([spec(0.1), spec(0.01)]);
    expect(rows[0]).toEqual({ key: "hyperparameters.lr", values: [0.1, 0.01], differs: true });
    expect(rows.filter((r) => r.differs).map((r) => r.key)).toEqual(["hyperparameters.lr"]);
    expect(rows.find((r) => r.key === "name")!.differs).toBe(false);
  });

  it("a key only one spec has differs", () => {
    const rows = specDiff([spec(0.1), { ...spec(0.1), precision: "bf16" }]);
    expect(rows[0]).toEqual({ key: "precision", values: [undefined, "bf16"], differs: true });
  });

  it("final and best: lowest for loss, highest for accuracy", () => {
    const curve = { step: [1, 2, 3], time: [0, 1, 2], value: [0.9, 0.2, 0.4] };
    expect(summarize("loss", curve)).toEqual({ final: 0.4, finalStep: 3, best: 0.2, bestStep: 2 });
    expect(summarize("accuracy", curve)).toMatchObject({ best: 0.9, bestStep: 1 });
    expect(summarize("loss", undefined).final).toBeNull();
    expect(lowerIsBetter("val/loss")).toBe(true);
  });

  it("aligns by step, or by seconds since each job started", () => {
    const a = { step: [1, 2], time: [100, 101], value: [1, 2] };
    const b = { step: [2, 3], time: [500, 502], value: [3, 4] };
    expect(alignCurves([a, b], "step")).toEqual([[1, 2, 3], [1, 2, null], [null, 3, 4]]);
    expect(alignCurves([a, b], "time")).toEqual([[0, 1, 2], [1, 2, null], [3, null, 4]]);
  });

  it("smooths with an EMA and keeps gaps", () => {
    expect(smooth([1, null, 3], 0.5)).toEqual([1, null, 2]);
    expect(smooth([1, 2], 0)).toEqual([1, 2]);
  });

  it("exports CSV with empty cells for gaps", () => {
    expect(toCsv(["step", "#1 a", '#2 "b"'], [[1, 2], [0.5, null], [null, 0.25]])).toBe(
      'step,#1 a,"#2 ""b"""\n1,0.5,\n2,,0.25\n',
    );
  });
});
