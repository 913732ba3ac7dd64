import { describe, expect, it } from "vitest";
import type { VNode } from "preact";
import type { Comparison, JobSpec, Template } from "../src/api/types";
import { formFromSpec, initialForm, toSpec } from "../src/lib/specForm";
import { REDUCE_CHOICES, SERVER_CHOICES, UPDATE_CHOICES, updateModeText } from "../src/lib/updateMode";
import { JobsTable } from "../src/views/compare/JobsTable";
import { ParallelismFields } from "../src/views/submit/RunFieldsets";

const mlp: Template = {
  name: "mlp",
  pipeline_unit: "layers",
  hyperparameters: [{ name: "steps", type: "integer", default: 200, minimum: 1, maximum: 1e7, choices: null, help: "" }],
};

/** Every element of a vnode tree, components left unexpanded (they are called where tested). */
function elements(node: unknown): VNode<Record<string, unknown>>[] {
  if (node === null || typeof node !== "object") return [];
  const vnode = node as VNode<Record<string, unknown>>;
  const children = vnode.props?.children;
  const kids = Array.isArray(children) ? children.flat(Infinity) : [children];
  return [vnode, ...kids.flatMap(elements)];
}

// an element rendered with data-testid, or a form input component given its testId
const byTestId = (tree: unknown, id: string) =>
  elements(tree).find((e) => e.props["data-testid"] === id || e.props.testId === id);

function text(node: unknown): string {
  if (typeof node === "string" || typeof node === "number") return String(node);
  if (node === null || typeof node !== "object") return "";
  const children = (node as VNode<Record<string, unknown>>).props?.children;
  return (Array.isArray(children) ? children.flat(Infinity) : [children]).map(text).join("");
}

describe("update modes on the submit form", () => {
  const data = { ...initialForm(mlp), name: "m", devices: "4" };

  it("sends nothing for the default (sync, ring all-reduce)", () => {
    expect(toSpec(data, mlp).parallelism).toEqual({ strategy: "data", devices: 4 });
  });

  it("sends each mode with only the fields it takes", () => {
    const ps = toSpec({ ...data, reduce: "parameter_server" }, mlp);
    expect(ps.parallelism).toEqual({ strategy: "data", devices: 4, reduce: "parameter_server" });
    const local = toSpec({ ...data, update: "local_sgd", syncEvery: "16", reduce: "parameter_server" }, mlp);
    expect(local.parallelism).toEqual({ strategy: "data", devices: 4, update: "local_sgd", sync_every: 16 });
    expect(toSpec({ ...data, update: "async" }, mlp).parallelism).toEqual({ strategy: "data", devices: 4, update: "async" });
    const bounded = toSpec({ ...data, update: "async", maxStaleness: "6" }, mlp);
    expect(bounded.parallelism).toEqual({ strategy: "data", devices: 4, update: "async", max_staleness: 6 });
  });

  it("a pipeline job sends no update mode (pipelines all-reduce their stages' gradients)", () => {
    const spec = toSpec({ ...data, strategy: "model", update: "async" }, mlp);
    expect(spec.parallelism).not.toHaveProperty("update");
  });

  it("a pasted spec fills the fields back", () => {
    const form = formFromSpec({ parallelism: { update: "async", max_staleness: 3 } }, data);
    expect([form.update, form.maxStaleness]).toEqual(["async", "3"]);
    const local = formFromSpec({ parallelism: { update: "local_sgd", sync_every: 32 } }, data);
    expect(toSpec(local, mlp).parallelism).toMatchObject({ update: "local_sgd", sync_every: 32 });
  });

  it("shows each choice with its trade, and only the fields that apply", () => {
    const set = () => undefined;
    const fields = (form: typeof data) => {
      const tree = ParallelismFields({ form, set, errors: new Map(), fit: null });
      const part = elements(tree).find((e) => typeof e.type === "function" && e.type.name === "UpdateModeFields");
      expect(part).toBeDefined();
      return (part!.type as (p: unknown) => unknown)(part!.props);
    };
    const sync = fields(data);
    expect(text(byTestId(sync, "submit-update-trade"))).toBe(UPDATE_CHOICES[0]!.trade);
    expect(text(byTestId(sync, "submit-reduce-trade"))).toBe(REDUCE_CHOICES[0]!.trade);
    expect(byTestId(sync, "submit-sync-every")).toBeUndefined();
    const asyncFields = fields({ ...data, update: "async" });
    expect(text(byTestId(asyncFields, "submit-update-trade"))).toContain("fast devices never wait");
    expect(byTestId(asyncFields, "submit-reduce")).toBeUndefined();
    expect(byTestId(asyncFields, "submit-max-staleness")).toBeDefined();
    const pipeline = ParallelismFields({ form: { ...data, strategy: "model" }, set, errors: new Map(), fit: null });
    expect(elements(pipeline).some((e) => typeof e.type === "function" && e.type.name === "UpdateModeFields")).toBe(false);
    // the server's place, with its trade, only where there is a parameter server
    expect(byTestId(sync, "submit-server")).toBeUndefined();
    expect(byTestId(asyncFields, "submit-server")).toBeDefined();
    const dedicated = fields({ ...data, reduce: "parameter_server", server: "dedicated" });
    expect(text(byTestId(dedicated, "submit-server-trade"))).toBe(SERVER_CHOICES[1]!.trade);
    expect(byTestId(fields({ ...data, update: "local_sgd" }), "submit-server")).toBeUndefined();
  });

  it("sends a dedicated server only with a parameter server, and reads it back", () => {
    const ps = toSpec({ ...data, reduce: "parameter_server", server: "dedicated" }, mlp);
    expect(ps.parallelism).toEqual({ strategy: "data", devices: 4, reduce: "parameter_server", server: "dedicated" });
    const bounded = toSpec({ ...data, update: "async", maxStaleness: "6", server: "dedicated" }, mlp);
    expect(bounded.parallelism).toMatchObject({ update: "async", max_staleness: 6, server: "dedicated" });
    expect(toSpec({ ...data, server: "dedicated" }, mlp).parallelism).toEqual({ strategy: "data", devices: 4 });
    expect(toSpec({ ...data, reduce: "parameter_server" }, mlp).parallelism).not.toHaveProperty("server");
    expect(formFromSpec({ parallelism: { update: "async", server: "dedicated" } }, data).server).toBe("dedicated");
  });
});

describe("Compare shows each run's update mode", () => {
  const spec = (parallelism: Record<string, unknown>) => ({ name: "j", template: "mlp", parallelism }) as unknown as JobSpec;

  it("names the mode and its setting", () => {
    expect(updateModeText(spec({ strategy: "data", devices: 2 }))).toBe("sync, all-reduce");
    expect(updateModeText(spec({ strategy: "data", reduce: "parameter_server" }))).toBe("sync, parameter server");
    expect(updateModeText(spec({ strategy: "data", update: "async" }))).toBe("async");
    expect(updateModeText(spec({ strategy: "data", update: "async", max_staleness: 3 }))).toBe("async, staleness ≤ 3");
    expect(updateModeText(spec({ strategy: "data", update: "local_sgd", sync_every: 8 }))).toBe("local SGD, every 8 steps");
    expect(updateModeText(spec({ strategy: "data", reduce: "parameter_server", server: "dedicated" }))).toBe(
      "sync, parameter server, dedicated server",
    );
    expect(updateModeText(spec({ strategy: "data", update: "async", server: "dedicated" }))).toBe("async, dedicated server");
    expect(updateModeText(spec({ strategy: "hybrid", devices: 4, pipeline_stages: 2 }))).toBe("— (pipeline: all-reduce)");
  });

  it("has a column with one cell per job", () => {
    const job = (id: number, parallelism: Record<string, unknown>) => ({ id, name: `j${id}`, state: "succeeded", step: 10, total_steps: 10, owner: "a", spec: spec(parallelism) });
    const comparison = { jobs: [job(1, { strategy: "data" }), job(2, { strategy: "data", update: "async" })], efficiency: {} } as unknown as Comparison;
    const tree = JobsTable({ comparison, theme: "light" });
    const head = elements(tree).find((e) => Array.isArray(e.props.columns));
    expect(head!.props.columns).toContain("Update mode");
    expect(text(byTestId(tree, "compare-update-1"))).toBe("sync, all-reduce");
    expect(text(byTestId(tree, "compare-update-2"))).toBe("async");
  });
});
