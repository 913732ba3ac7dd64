import { describe, expect, it } from "vitest";
import { capacity, managerSummary, type ManagerView } from "../src/lib/manager";

const view: ManagerView = {
  manager: "slurm",
  observed_at: "2026-11-28T18:00:00Z",
  unreachable: null,
  nodes: [
    { name: "gpu01", state: "MIXED", health: "up", reason: null, cpus: 64, cpus_allocated: 16, gpus: 8, partitions: ["low"], jobs: [3] },
    { name: "gpu02", state: "IDLE+DRAIN", health: "drained", reason: "bad fan", cpus: 64, cpus_allocated: 0, gpus: 0, partitions: ["low"], jobs: [] },
    { name: "gpu03", state: "DOWN+NOT_RESPONDING", health: "lost", reason: "Not responding", cpus: 1, cpus_allocated: 0, gpus: 1, partitions: ["low"], jobs: [] },
  ],
};
const at = Date.parse("2026-11-28T18:00:10Z");

describe("the cluster manager's nodes", () => {
  it("counts nodes by health", () => {
    expect(managerSummary(view, at)).toEqual({ line: "1 of 3 nodes up · 1 drained · 1 lost", warning: null });
  });

  it("warns while the manager does not answer, and when the view is old", () => {
    expect(managerSummary({ ...view, unreachable: "Slurm unreachable: squeue: timed out" }, at).warning).toBe(
      "Slurm unreachable: squeue: timed out (nodes as last seen)",
    );
    expect(managerSummary(view, at + 120_000).warning).toBe("not read for 130 s (is the scheduler running?)");
  });

  it("says what each node holds", () => {
    expect(view.nodes.map(capacity)).toEqual([
      "16 / 64 CPUs allocated · 8 GPUs",
      "0 / 64 CPUs allocated",
      "0 / 1 CPUs allocated · 1 GPU",
    ]);
  });
});
