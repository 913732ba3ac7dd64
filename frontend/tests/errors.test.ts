import { describe, expect, it } from "vitest";
import { dottedField, fieldErrors } from "../src/lib/errors";

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
