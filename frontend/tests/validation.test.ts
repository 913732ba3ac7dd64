import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../src/api/http";
import { capacityVerdict, checkedFrom, mergeProblems, Validator, type Outcome, type ValidationAnswer } from "../src/lib/validation";

const KNOWN = ["name", "parallelism", "parallelism.devices", "entrypoint", "entrypoint.script", "hyperparameters", "hyperparameters.lr"];

function answer(devices: number, problems: ValidationAnswer["problems"] = []): ValidationAnswer {
  return {
    valid: problems.length === 0,
    implications: { data_parallel_degree: devices, pipeline_stages: 1, global_batch: 32 * devices, bubble_fraction: 0, warnings: [] },
    memory: null,
    problems,
  };
}

const TOO_BIG = { loc: ["body", "parallelism", "devices"], msg: "no registered node could ever hold this job", type: "value_error" };

describe("Validator (debounced POST /api/jobs/validate)", () => {
  let sent: Record<string, unknown>[];
  let pending: ((a: ValidationAnswer) => void)[];
  let reported: Outcome[];
  let validator: Validator;

  beforeEach(() => {
    vi.useFakeTimers();
    sent = [];
    pending = [];
    reported = [];
    validator = new Validator(
      (spec) => {
        sent.push(spec);
        return new Promise((resolve) => pending.push(resolve));
      },
      (o) => reported.push(o),
      400,
    );
  });
  afterEach(() => vi.useRealTimers());

  it("sends only the last of a burst of changes, 400 ms after it", async () => {
    for (const devices of [1, 2, 3]) {
      expect(validator.check({ devices })).toBe(true);
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(sent).toEqual([]);
    await vi.advanceTimersByTimeAsync(300);
    expect(sent).toEqual([{ devices: 3 }]);
    pending[0]!(answer(3));
    await vi.advanceTimersByTimeAsync(0);
    expect(reported).toEqual([{ answer: answer(3) }]);
  });

  it("drops an answer to an older spec that arrives after a newer one was asked", async () => {
    validator.check({ devices: 1 });
    await vi.advanceTimersByTimeAsync(400);
    validator.check({ devices: 2 });
    await vi.advanceTimersByTimeAsync(400);
    expect(sent).toEqual([{ devices: 1 }, { devices: 2 }]);
    pending[1]!(answer(2));
    pending[0]!(answer(1)); // late
    await vi.advanceTimersByTimeAsync(0);
    expect(reported).toEqual([{ answer: answer(2) }]);
  });

  it("coming back to the spec last sent sends nothing and reports its answer again", async () => {
    validator.check({ devices: 1 });
    await vi.advanceTimersByTimeAsync(400);
    pending[0]!(answer(1));
    await vi.advanceTimersByTimeAsync(0);
    expect(validator.check({ devices: 2 })).toBe(true);
    expect(validator.check({ devices: 1 })).toBe(false);
    await vi.advanceTimersByTimeAsync(1000);
    expect(sent).toHaveLength(1);
    expect(reported).toEqual([{ answer: answer(1) }, { answer: answer(1) }]);
  });

  it("reports a refusal, and nothing after dispose", async () => {
    const refusal = new ApiError(422, [{ loc: ["body", "name"], msg: "too short" }]);
    const failing = new Validator(() => Promise.reject(refusal), (o) => reported.push(o), 400);
    failing.check({ name: "" });
    await vi.advanceTimersByTimeAsync(400);
    expect(reported).toEqual([{ error: refusal }]);
    validator.check({ devices: 1 });
    await vi.advanceTimersByTimeAsync(400);
    validator.dispose();
    pending[0]!(answer(1));
    await vi.advanceTimersByTimeAsync(1000);
    expect(reported).toHaveLength(1);
  });
});

describe("checkedFrom (the server's answer → what the form shows)", () => {
  it("a valid spec's answer: its implications, its problems next to their fields", () => {
    const checked = checkedFrom({ answer: answer(5, [TOO_BIG]) }, KNOWN);
    expect(checked.status).toBe("done");
    expect(checked.answer?.implications?.data_parallel_degree).toBe(5);
    expect(checked.problems).toEqual(new Map([["parallelism.devices", [TOO_BIG.msg]]]));
  });

  it("a 422 (a body that is no JSON object): no answer, each refusal next to its field (a model validator's named field too)", () => {
    const detail = [
      { loc: ["body", "parallelism"], msg: "Value error, strategy model needs pipeline_stages equal to devices" },
      { loc: ["body", "hyperparameters"], msg: "Value error, hyperparameters.lr must be <= 10" },
      { loc: ["body"], msg: "precision 'fp16' is not supported yet with pipelines" },
    ];
    const checked = checkedFrom({ error: new ApiError(422, detail) }, KNOWN);
    expect(checked.answer).toBeNull();
    expect(checked.problems.get("parallelism")).toEqual(["strategy model needs pipeline_stages equal to devices"]);
    expect(checked.problems.get("hyperparameters.lr")).toEqual(["hyperparameters.lr must be <= 10"]);
    expect(checked.problems.get("")).toEqual(["precision 'fp16' is not supported yet with pipelines"]);
  });

  it("a refused spec's answer: the implications of its valid parts, its refusals next to their fields", () => {
    const refused = { ...answer(2), valid: false, problems: [{ loc: ["body", "hyperparameters"], msg: "Value error, hyperparameters.lr must be <= 10", type: "value_error" }] };
    const checked = checkedFrom({ answer: refused }, KNOWN);
    expect(checked.answer?.implications?.data_parallel_degree).toBe(2);
    expect(checked.problems).toEqual(new Map([["hyperparameters.lr", ["hyperparameters.lr must be <= 10"]]]));
  });

  it("a failed request says the spec could not be checked", () => {
    const checked = checkedFrom({ error: new ApiError(503, "down") }, KNOWN);
    expect(checked.status).toBe("failed");
    expect(checked.problems.get("")?.[0]).toContain("could not check the spec");
  });
});

describe("capacityVerdict and mergeProblems", () => {
  it("fits the cluster unless the server refuses the device count; unknown when the spec waits", () => {
    expect(capacityVerdict(answer(2), false)).toBe("yes");
    expect(capacityVerdict(answer(5, [TOO_BIG]), false)).toBe(`no: ${TOO_BIG.msg}`);
    expect(capacityVerdict(answer(5), true)).toBeNull();
    expect(capacityVerdict(null, false)).toBeNull();
  });

  it("the submit's refusals and the live problems, each message once per field", () => {
    const merged = mergeProblems(new Map([["env", ["reserved"]], ["name", ["short"]]]), new Map([["name", ["short", "bad"]]]));
    expect(merged).toEqual(new Map([["env", ["reserved"]], ["name", ["short", "bad"]]]));
  });
});
