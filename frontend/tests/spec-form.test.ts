import { describe, expect, it } from "vitest";
import type { Template } from "../src/api/types";
import { parseRoute } from "../src/router";
import { formFromSpec, formImplications, initialForm, toSpec } from "../src/lib/specForm";

const mlp: Template = {
  name: "mlp",
  pipeline_unit: "layers",
  hyperparameters: [
    { name: "steps", type: "integer", default: 200, minimum: 1, maximum: 1e7, choices: null, help: "" },
    { name: "batch_size", type: "integer", default: 32, minimum: 1, maximum: 65536, choices: null, help: "" },
    { name: "lr", type: "number", default: 0.01, minimum: 1e-7, maximum: 10, choices: null, help: "" },
    { name: "optimizer", type: "string", default: "adamw", minimum: null, maximum: null, choices: ["adamw", "sgd"], help: "" },
  ],
};

describe("submit form → JobSpec", () => {
  it("a data-parallel form leaves pipeline fields to their defaults", () => {
    const form = { ...initialForm(mlp), name: "a", devices: "2", checkpointEvery: "50", tags: "x, y" };
    expect(toSpec(form, mlp)).toEqual({
      name: "a",
      template: "mlp",
      parallelism: { strategy: "data", devices: 2 },
      hyperparameters: { steps: 200, batch_size: 32, lr: 0.01, optimizer: "adamw" },
      precision: "fp32",
      grad_accum: 1,
      checkpoint: { every_steps: 50 },
      priority: "normal",
      tags: ["x", "y"],
    });
  });

  it("a hybrid form sends stages and microbatches; text that is not a number goes as typed", () => {
    const form = { ...initialForm(mlp), strategy: "hybrid" as const, devices: "4", pipelineStages: "2", microbatches: "8", gradAccum: "two" };
    const spec = toSpec(form, mlp);
    expect(spec.parallelism).toEqual({ strategy: "hybrid", devices: 4, pipeline_stages: 2, microbatches: 8 });
    expect(spec.grad_accum).toBe("two");
    expect(formImplications(form)).toBeNull();
    expect(formImplications({ ...form, gradAccum: "2" })?.global_batch).toBe(32 * 2 * 2);
  });

  it("fills from a pasted spec", () => {
    const form = formFromSpec({ name: "p", parallelism: { devices: 3 }, hyperparameters: { steps: 5 }, tags: ["a"] }, initialForm(mlp));
    expect(form).toMatchObject({ name: "p", devices: "3", tags: "a" });
    expect(form.hyperparameters.steps).toBe("5");
  });
});

describe("routes", () => {
  it("decodes deep links and refuses off-site login redirects", () => {
    expect(parseRoute("/jobs/12")).toEqual({ name: "job", id: 12 });
    expect(parseRoute("/submit/")).toEqual({ name: "submit", clone: null });
    expect(parseRoute("/submit", "?clone=4")).toEqual({ name: "submit", clone: 4 });
    expect(parseRoute("/compare", "?jobs=3,5,x,3")).toEqual({ name: "compare", ids: [3, 5] });
    expect(parseRoute("/login", "?next=%2Fjobs%2F3")).toEqual({ name: "login", next: "/jobs/3" });
    expect(parseRoute("/login", "?next=//evil.example")).toEqual({ name: "login", next: "/" });
    expect(parseRoute("/nope").name).toBe("notfound");
  });
});
