/** The cluster page's view of the cluster manager's own nodes (Slurm's, under the Slurm executor). */
import type { components } from "../api/schema";

export type ManagerView = components["schemas"]["ManagerOut"];
export type ManagerNode = components["schemas"]["ManagerNodeOut"];

/** A view older than this (seconds) is stale: the scheduler's executor stopped reading it. */
export const STALE_SECONDS = 60;

export interface ManagerSummary {
  /** "2 of 3 nodes up · 1 drained · 0 lost" */
  line: string;
  /** set when the view is old or the manager does not answer: shown as a warning */
  warning: string | null;
}

/** One line over the nodes' health, and a warning when the view cannot be trusted now. */
export function managerSummary(view: ManagerView, now: number = Date.now()): ManagerSummary {
  const count = (health: ManagerNode["health"]) => view.nodes.filter((n) => n.health === health).length;
  const line = `${count("up")} of ${view.nodes.length} nodes up · ${count("drained")} drained · ${count("lost")} lost`;
  const age = (now - Date.parse(view.observed_at)) / 1000;
  let warning: string | null = null;
  if (view.unreachable) warning = `${view.unreachable} (nodes as last seen)`;
  else if (age > STALE_SECONDS) warning = `not read for ${Math.round(age)} s (is the scheduler running?)`;
  return { line, warning };
}

/** "3 / 8" CPUs allocated, or GPUs when the node has them. */
export function capacity(node: ManagerNode): string {
  const gpus = node.gpus > 0 ? ` · ${node.gpus} GPU${node.gpus > 1 ? "s" : ""}` : "";
  return `${node.cpus_allocated} / ${node.cpus} CPUs allocated${gpus}`;
}
