/** Per-rank step-time breakdown over the recent steps, and which ranks straggle. */
import type { MetricStore } from "./series";

export const PHASES = ["data_time", "compute_time", "optim_time"] as const;

export interface RankTimes {
  rank: number;
  step_time: number | null;
  data_time: number | null;
  compute_time: number | null;
  optim_time: number | null;
  samples_per_s: number | null;
  straggler: boolean;
}

/** Mean of the last `window` values a rank reported for a metric. */
function recentMean(store: MetricStore, name: string, rank: number, window: number): number | null {
  // the rank's own newest values: copying and aligning every rank's whole series here cost
  // a running job's page most of its main thread (issue #33)
  const values = store.newest(name, rank, window);
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

/**
 * One row per rank. A straggler is a rank whose recent step time is over `slack` times the
 * median of the ranks (with 2+ ranks), i.e. the one the others wait for at every all-reduce.
 */
export function rankTimes(store: MetricStore, window = 20, slack = 1.2): RankTimes[] {
  const rows = store.ranks("step_time").map((rank) => ({
    rank,
    step_time: recentMean(store, "step_time", rank, window),
    data_time: recentMean(store, "data_time", rank, window),
    compute_time: recentMean(store, "compute_time", rank, window),
    optim_time: recentMean(store, "optim_time", rank, window),
    samples_per_s: recentMean(store, "samples_per_s", rank, window),
    straggler: false,
  }));
  const times = rows.map((r) => r.step_time).filter((t): t is number => t !== null).sort((a, b) => a - b);
  if (times.length >= 2) {
    const median = times[Math.floor((times.length - 1) / 2)]!;
    for (const row of rows) row.straggler = row.step_time !== null && row.step_time > median * slack;
  }
  return rows;
}
