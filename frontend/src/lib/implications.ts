/** What a spec implies, as the server computes it (JobSpec.implications(); never computed here). */

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
