/** Update modes of data-parallel jobs (#35): the submit form's choices and Compare's column. */
import type { components } from "../api/schema";
import type { JobSpec } from "../api/types";

export type Update = components["schemas"]["Update"];
export type Reduce = components["schemas"]["Reduce"];
export type Server = components["schemas"]["Server"];

/** Each choice with the one line on what it trades (docs/jobspec.md says the same). */
export const UPDATE_CHOICES: { value: Update; label: string; trade: string }[] = [
  {
    value: "sync",
    label: "sync",
    trade: "every step waits for every gradient: as slow as the slowest device, the loss falls as on one device",
  },
  {
    value: "async",
    label: "async",
    trade: "rank 0 applies each gradient when it arrives: fast devices never wait, at the price of stale gradients and a noisier loss",
  },
  {
    value: "local_sgd",
    label: "local SGD",
    trade: "replicas step alone and average every N steps: far fewer bytes, replicas drift apart in between",
  },
];

export const REDUCE_CHOICES: { value: Reduce; label: string; trade: string }[] = [
  {
    value: "allreduce",
    label: "ring all-reduce (DDP)",
    trade: "every device sends and receives about 2(N−1)/N of the gradient: no bottleneck",
  },
  {
    value: "parameter_server",
    label: "parameter server",
    trade: "rank 0 gathers every gradient and sends the weights back: simple, but its link is the bottleneck",
  },
];

/** Where a parameter server (sync parameter server, async) holds the weights. */
export const SERVER_CHOICES: { value: Server; label: string; trade: string }[] = [
  {
    value: "rank0",
    label: "rank 0 (also trains)",
    trade: "every device trains; rank 0 serves between its own steps, so a slow rank 0 delays every reply",
  },
  {
    value: "dedicated",
    label: "a dedicated rank",
    trade: "rank 0 only serves: its replies never wait on its own batch, at the price of one device that trains nothing",
  },
];

/** Whether the update mode has a parameter server (parallelism.server applies). */
export function hasServer(update: Update, reduce: Reduce): boolean {
  return update === "async" || (update === "sync" && reduce === "parameter_server");
}

export const SYNC_EVERY_TRADE = "steps between averages: larger moves fewer bytes and lets replicas drift further";
export const MAX_STALENESS_TRADE =
  "most updates between a rank's weights and its gradient: smaller is closer to sync (a slow rank then holds the others); empty: no bound";

/** One line for a job's update mode, as Compare shows it ("—" where it does not apply). */
export function updateModeText(spec: JobSpec): string {
  const par = spec.parallelism;
  if (!par || (par.strategy ?? "data") !== "data") return "— (pipeline: all-reduce)";
  const update = (par.update ?? "sync") as Update;
  const dedicated = par.server === "dedicated" ? ", dedicated server" : "";
  if (update === "sync") return par.reduce === "parameter_server" ? `sync, parameter server${dedicated}` : "sync, all-reduce";
  if (update === "local_sgd") return `local SGD, every ${par.sync_every ?? "?"} steps`;
  return (par.max_staleness ? `async, staleness ≤ ${par.max_staleness}` : "async") + dedicated;
}
