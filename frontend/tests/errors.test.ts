import { describe, expect, it } from "vitest";
import { dottedField, fieldErrors, plainIssues, plainMessage } from "../src/lib/errors";

const known = ["name", "parallelism", "parallelism.devices", "hyperparameters", "hyperparameters.lr", "tags"];

describe("422 field errors", () => {
  it("maps FastAPI locs to dotted fields", () => {
    expect(dottedField(["body", "parallelism", "devices"])).toBe("parallelism.devices");
  });

  it("puts each message next to the longest known field, the rest on the form", () => {
    const detail = [
      { loc: ["body", "parallelism", "devices"], msg: "Input should be greater than or equal to 1", type: "x" },
      { loc: ["body", "hyperparameters"], msg: "Value error, hyperparameters.lr must be <= 10", type: "x" },
      { loc: ["body", "tags", 0], msg: "Value error, tag 'a b' must be ...", type: "x" },
      { loc: ["body"], msg: "Value error, give exactly one of template or entrypoint", type: "x" },
      { loc: ["body", "lr_schedule", "kind"], msg: "bad", type: "x" },
    ];
    const errors = fieldErrors(detail, known);
    expect(errors.get("parallelism.devices")).toEqual(["Input should be greater than or equal to 1"]);
    expect(errors.get("hyperparameters.lr")).toEqual(["hyperparameters.lr must be <= 10"]);
    expect(errors.has("hyperparameters")).toBe(false);
    expect(errors.get("tags")).toEqual(["tags.0: tag 'a b' must be ..."]);
    expect(errors.get("")).toEqual(["give exactly one of template or entrypoint", "lr_schedule.kind: bad"]);
  });

  it("a sentence naming a field the form lacks stays with its loc", () => {
    const detail = [{ loc: ["body", "hyperparameters"], msg: "Value error, hyperparameters.momentum is unknown", type: "x" }];
    expect(fieldErrors(detail, known).get("hyperparameters")).toEqual(["hyperparameters.momentum is unknown"]);
  });

  it("a string detail is a form error", () => {
    expect(fieldErrors("template not found", known).get("")).toEqual(["template not found"]);
  });
});

describe("a pasted spec's refusals", () => {
  it("lists every refusal with its field, in plain words", () => {
    const detail = [
      { type: "int_parsing", loc: ["body", "parallelism", "devices"], msg: "Input should be a valid integer, unable to parse string as an integer", input: "two" },
      { type: "extra_forbidden", loc: ["body", "hyperparamters"], msg: "Extra inputs are not permitted", input: {} },
      { type: "greater_than_equal", loc: ["body", "checkpoint", "keep_last"], msg: "Input should be greater than or equal to 1", input: 0 },
      { type: "literal_error", loc: ["body", "parallelism", "schedule"], msg: "Input should be 'gpipe' or '1f1b'", input: "x" },
      { type: "missing", loc: ["body", "template"], msg: "Field required" },
      { type: "value_error", loc: ["body", "hyperparameters"], msg: "Value error, hyperparameters.lr must be <= 10" },
    ];
    expect(plainIssues(detail)).toEqual([
      "parallelism.devices: must be a whole number",
      "hyperparamters: is not a setting of a job spec (misspelt, or in the wrong section?)",
      "checkpoint.keep_last: must be at least 1",
      "parallelism.schedule: must be 'gpipe' or '1f1b'",
      "template: is required",
      "hyperparameters.lr must be <= 10",
    ]);
  });

  it("keeps a sentence it has no plain form for, and a plain-text refusal", () => {
    expect(plainMessage("Value error, devices (3) must divide evenly by nodes (2)")).toBe("devices (3) must divide evenly by nodes (2)");
    expect(plainIssues("spec too large")).toEqual(["spec too large"]);
  });
});
