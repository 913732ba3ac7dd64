/**
 * A job's shape as its page states it: what the current attempt's engine reported it uses
 * (its start event, `job.facts`), and only before that the spec's plan, marked as planned.
 * After an elastic resume from 2 devices to 1 the engine keeps the checkpoint's global
 * batch (twice the accumulation): the spec's arithmetic would halve it.
 */
import type { Job } from "../api/types";
import { readImplications } from "./implications";

type ShapeOf = Pick<Job, "spec" | "implications" | "facts" | "placement">;

export interface RunShape {
  strategy: string;
  devices: number;
  dataParallel: number;
  stages: number;
  batchSize: number | null;
  accumulation: number;
  globalBatch: number | null;
  /** nothing reported yet (or a script that reports nothing): these come from the spec */
  planned: boolean;
}

export function runShape(job: ShapeOf): RunShape {
  const spec = job.spec;
  const strategy = spec.parallelism?.strategy ?? "data";
  const facts = job.facts;
  if (facts) {
    return {
      strategy,
      devices: facts.world_size,
      dataParallel: facts.data_parallel,
      stages: facts.pipeline_stages,
      batchSize: facts.batch_size,
      accumulation: facts.accumulation,
      globalBatch: facts.global_batch,
      planned: false,
    };
  }
  const imp = readImplications(job.implications);
  const batch = spec.hyperparameters?.batch_size;
  return {
    strategy,
    devices: spec.parallelism?.devices ?? 1,
    dataParallel: imp.data_parallel_degree,
    stages: imp.pipeline_stages,
    batchSize: typeof batch === "number" ? batch : null,
    accumulation: spec.grad_accum ?? 1,
    globalBatch: imp.global_batch,
    planned: true,
  };
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** "data · 1 device · dp 1 · stages 1" */
export function strategyText(shape: RunShape): string {
  return `${shape.strategy} · ${plural(shape.devices, "device", "devices")} · dp ${shape.dataParallel} · stages ${shape.stages}`;
}

/** "64 = 32 × 2 accumulation × 1 replica" (or "—" where the batch is the script's own) */
export function globalBatchText(shape: RunShape): string {
  if (shape.globalBatch == null) return "—";
  if (shape.batchSize == null) return String(shape.globalBatch);
  const replicas = plural(shape.dataParallel, "replica", "replicas");
  return `${shape.globalBatch} = ${shape.batchSize} × ${shape.accumulation} accumulation × ${replicas}`;
}

/** Every rank of the current attempt (one per device of its gang), for the log's rank filter. */
export function attemptRanks(job: Pick<Job, "facts" | "placement" | "spec">): number[] {
  const placed = job.placement.reduce((sum, part) => sum + part.devices.length, 0);
  const size = job.facts?.world_size ?? (placed || (job.spec.parallelism?.devices ?? 1));
  return Array.from({ length: size }, (_, rank) => rank);
}

/** What the resume dialog says it will do: always the device count it will use. */
export function resumeText(wanted: number, current: number): string {
  if (!Number.isInteger(wanted) || wanted < 1) return "Enter a whole number of devices, 1 or more.";
  const on = plural(wanted, "device", "devices");
  if (wanted === current) return `It resumes on ${on}, as before.`;
  return `It resumes on ${on} (was ${current}; the checkpoint is resharded and keeps its global batch).`;
}
