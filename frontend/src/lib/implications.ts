/** What a spec implies, computed in the browser the same way workers/contract/spec.py does. */
import type { Strategy } from "../api/types";

/** The shape of JobSpec.implications() in workers/contract/spec.py (the API sends it as a plain object). */
export interface Implications {
  data_parallel_degree: number;
  pipeline_stages: number;
  global_batch: number | null;
  bubble_fraction: number;
  warnings: string[];
}

/** Read a job's `implications` object defensively. */
export function readImplications(raw: Record<string, unknown>): Implications {
  const num = (v: unknown, fallback: number) => (typeof v === "number" && Number.isFinite(v) ? v : fallback);
  return {
    data_parallel_degree: num(raw.data_parallel_degree, 1),
    pipeline_stages: num(raw.pipeline_stages, 1),
    global_batch: typeof raw.global_batch === "number" ? raw.global_batch : null,
    bubble_fraction: num(raw.bubble_fraction, 0),
    warnings: Array.isArray(raw.warnings) ? raw.warnings.filter((w): w is string => typeof w === "string") : [],
  };
}

export interface ParallelInput {
  strategy: Strategy;
  devices: number;
  pipelineStages: number | null;
  microbatches: number;
  batchSize: number | null;
  gradAccum: number;
}

/** Pipeline stages the strategy actually uses (data: 1, model: one per device). */
export function effectiveStages(p: Pick<ParallelInput, "strategy" | "devices" | "pipelineStages">): number {
  if (p.strategy === "data") return 1;
  if (p.strategy === "model") return p.pipelineStages ?? p.devices;
  return p.pipelineStages ?? 1;
}

/** Idle share of a GPipe/1F1B pipeline step: (K-1)/(M+K-1). */
export function bubbleFraction(stages: number, microbatches: number): number {
  return (stages - 1) / (microbatches + stages - 1);
}

/** Degrees, global batch, bubble and human warnings; problems the server would refuse too. */
export function implications(p: ParallelInput): Implications & { problems: string[] } {
  const stages = effectiveStages(p);
  const problems: string[] = [];
  if (p.strategy === "data" && p.microbatches !== 1) {
    problems.push("microbatches applies to the model and hybrid strategies only");
  }
  if (p.strategy === "model") {
    if (stages !== p.devices) problems.push("strategy model needs pipeline_stages equal to devices");
    if (stages < 2) problems.push("strategy model needs at least 2 devices (one per stage)");
  }
  if (p.strategy === "hybrid") {
    if (stages < 2) problems.push("strategy hybrid needs pipeline_stages >= 2");
    else if (p.devices % stages !== 0 || p.devices / stages < 2) {
      problems.push("strategy hybrid needs devices to be a multiple (>= 2) of pipeline_stages");
    }
  }
  if (p.batchSize !== null && p.microbatches > 0 && p.batchSize % p.microbatches !== 0) {
    problems.push(`batch_size (${p.batchSize}) must split evenly into microbatches (${p.microbatches})`);
  }
  const dp = Math.floor(p.devices / stages);
  const bubble = bubbleFraction(stages, p.microbatches);
  const warnings: string[] = [];
  if (p.strategy !== "data" && p.microbatches < 4 * stages) {
    warnings.push(
      `microbatches (${p.microbatches}) < 4 x pipeline_stages (${stages}): ` +
        `the pipeline idles ${Math.round(bubble * 100)}% of each step`,
    );
  }
  return {
    data_parallel_degree: dp,
    pipeline_stages: stages,
    global_batch: p.batchSize === null ? null : p.batchSize * p.gradAccum * dp,
    bubble_fraction: bubble,
    warnings,
    problems,
  };
}
