import { describe, expect, it } from "vitest";
import type { Template } from "../src/api/types";
import { parseRoute } from "../src/router";
import { formatArgs, formFromSpec, initialForm, parseArgs, toSpec } from "../src/lib/specForm";

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
  });

  it("fills from a pasted spec", () => {
    const form = formFromSpec({ name: "p", parallelism: { devices: 3 }, hyperparameters: { steps: 5 }, tags: ["a"] }, initialForm(mlp));
    expect(form).toMatchObject({ name: "p", devices: "3", tags: "a" });
    expect(form.hyperparameters.steps).toBe("5");
  });
});

describe("submit form in script mode → JobSpec", () => {
  const script = { ...initialForm(mlp), mode: "script" as const, name: "s", devices: "2" };

  it("sends the entrypoint and no template or hyperparameters", () => {
    const spec = toSpec({ ...script, script: " train.py ", args: "--epochs 3\n--lr 0.1" }, mlp);
    expect(spec).toEqual({
      name: "s",
      entrypoint: { script: "train.py", args: ["--epochs", "3", "--lr", "0.1"] },
      parallelism: { strategy: "data", devices: 2 },
      precision: "fp32",
      grad_accum: 1,
      checkpoint: { every_steps: null },
      priority: "normal",
      tags: [],
    });
    expect(spec).not.toHaveProperty("template");
    expect(spec).not.toHaveProperty("hyperparameters");
  });

  it("a module instead of a script; strategy fields as in template mode", () => {
    const spec = toSpec({ ...script, module: "pkg.train", strategy: "model", microbatches: "8" }, mlp);
    expect(spec.entrypoint).toEqual({ module: "pkg.train", args: [] });
    expect(spec.parallelism).toEqual({ strategy: "model", devices: 2, microbatches: 8 });
  });

  it("leaves both or neither target for the server to name", () => {
    expect(toSpec({ ...script, script: "a.py", module: "b" }, mlp).entrypoint).toEqual({ script: "a.py", module: "b", args: [] });
    expect(toSpec(script, mlp).entrypoint).toEqual({ args: [] });
    expect(toSpec({ ...script, script: "../escape.py" }, mlp).entrypoint).toEqual({ script: "../escape.py", args: [] });
  });

  it("switching back to template mode sends the template's hyperparameters again", () => {
    const spec = toSpec({ ...script, script: "train.py", mode: "template" }, mlp);
    expect(spec.template).toBe("mlp");
    expect(spec).not.toHaveProperty("entrypoint");
    expect(spec.hyperparameters).toMatchObject({ steps: 200 });
  });

  it("parses arguments one per line or as a shell-like list", () => {
    expect(parseArgs("")).toEqual([]);
    expect(parseArgs("--a\n\n  --b  \r\n")).toEqual(["--a", "--b"]);
    expect(parseArgs(`--name "my run" --tag 'a b' x\\ y ""`)).toEqual(["--name", "my run", "--tag", "a b", "x y", ""]);
    expect(parseArgs(`--msg "say \\"hi\\"" 'it''s'`)).toEqual(["--msg", 'say "hi"', "its"]);
    expect(parseArgs(`--open "unterminated\nnext`)).toEqual(["--open", "unterminated", "next"]);
  });

  it("a cloned script job fills script mode, and its arguments read back the same", () => {
    const args = ["--name", "my run", "it's", "", "plain"];
    const form = formFromSpec({ name: "c", entrypoint: { script: "train.py", args } }, initialForm(mlp));
    expect(form).toMatchObject({ mode: "script", script: "train.py", module: "" });
    expect(parseArgs(form.args)).toEqual(args);
    expect(parseArgs(formatArgs(args))).toEqual(args);
    expect(formFromSpec({ name: "t", template: "mlp" }, form).mode).toBe("template");
  });
});

describe("routes", () => {
  it("decodes deep links and refuses off-site login redirects", () => {
    expect(parseRoute("/jobs/12")).toEqual({ name: "job", id: 12 });
    expect(parseRoute("/submit/")).toEqual({ name: "submit", clone: null, fromStep: null });
    expect(parseRoute("/submit", "?clone=4")).toEqual({ name: "submit", clone: 4, fromStep: null });
    expect(parseRoute("/submit", "?clone=4&from_step=20")).toEqual({ name: "submit", clone: 4, fromStep: 20 });
    // a step without its job is no clone
    expect(parseRoute("/submit", "?from_step=20")).toEqual({ name: "submit", clone: null, fromStep: null });
    expect(parseRoute("/compare", "?jobs=3,5,x,3")).toEqual({ name: "compare", ids: [3, 5] });
    expect(parseRoute("/login", "?next=%2Fjobs%2F3")).toEqual({ name: "login", next: "/jobs/3" });
    expect(parseRoute("/login", "?next=//evil.example")).toEqual({ name: "login", next: "/" });
    expect(parseRoute("/nope").name).toBe("notfound");
  });
});

describe("the form's env and wait_for_capacity", () => {
  it("sends the variables and the choice to wait only when given, and reads them back from a spec", () => {
    const template = { name: "mlp", hyperparameters: [] } as unknown as Template;
    const form = { ...initialForm(template), name: "e", env: "NCCL_DEBUG=INFO\nSEED_NOTE=a=b", waitForCapacity: true };
    const spec = toSpec(form, template);
    expect(spec.env).toEqual({ NCCL_DEBUG: "INFO", SEED_NOTE: "a=b" });
    expect(spec.wait_for_capacity).toBe(true);
    expect("env" in toSpec(initialForm(template), template)).toBe(false);
    const back = formFromSpec(spec, initialForm(template));
    expect([back.env, back.waitForCapacity]).toEqual(["NCCL_DEBUG=INFO\nSEED_NOTE=a=b", true]);
  });
});
