/** The board's pure logic: scheduling order, sections, filters, ETA. */
import type { Job } from "../api/types";

const PRIORITY_RANK: Record<string, number> = { high: 0, normal: 1, low: 2 };

/**
 * The scheduler's order (backend/scheduler/policy.py): its last pass's place for each job
 * (priority, then the owner's fair share, then submission); before a pass has placed a
 * job, priority then submission (id).
 */
export function queueOrder(jobs: Iterable<Job>): Job[] {
  const place = (j: Job) => j.queue_position ?? Number.MAX_SAFE_INTEGER;
  return [...jobs]
    .filter((j) => j.phase === "waiting")
    .sort(
      (a, b) =>
        place(a) - place(b) || (PRIORITY_RANK[a.priority] ?? 1) - (PRIORITY_RANK[b.priority] ?? 1) || a.id - b.id,
    );
}

export interface Sections {
  queued: Job[];
  active: Job[];
  /** Finished and paused jobs, newest first. */
  done: Job[];
}

export function sections(jobs: Job[]): Sections {
  return {
    queued: queueOrder(jobs),
    active: jobs.filter((j) => j.phase === "active").sort((a, b) => a.id - b.id),
    done: jobs.filter((j) => j.phase === "paused" || j.phase === "finished").sort((a, b) => b.id - a.id),
  };
}

export interface Filters {
  state: string;
  owner: string;
  tag: string;
  q: string;
}

export const NO_FILTERS: Filters = { state: "", owner: "", tag: "", q: "" };

/** "active" and "finished" are the server's phases; any other non-empty state matches exactly. */
export function matches(job: Job, f: Filters): boolean {
  // the groups are the server's (JobOut.phase), not a copy of its state lists
  if (f.state === "active" && job.phase !== "active") return false;
  if (f.state === "finished" && job.phase !== "finished") return false;
  if (f.state && f.state !== "active" && f.state !== "finished" && job.state !== f.state) return false;
  if (f.owner && job.owner !== f.owner) return false;
  if (f.tag && !job.tags.includes(f.tag)) return false;
  const q = f.q.trim().toLowerCase();
  if (q && !job.name.toLowerCase().includes(q) && String(job.id) !== q.replace(/^#/, "")) return false;
  return true;
}

export function filtersFromQuery(search: string): Filters {
  const p = new URLSearchParams(search);
  return { state: p.get("state") ?? "", owner: p.get("owner") ?? "", tag: p.get("tag") ?? "", q: p.get("q") ?? "" };
}

export function filtersToQuery(f: Filters): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) p.set(k, v);
  const text = p.toString();
  return text ? `?${text}` : "";
}

/** Seconds left at the job's average pace since it started; null when unknown. */
export function etaSeconds(job: Pick<Job, "step" | "total_steps" | "started_at">, now = Date.now()): number | null {
  if (!job.total_steps || !job.started_at || job.step <= 0) return null;
  const elapsed = (now - Date.parse(job.started_at)) / 1000;
  if (!(elapsed > 0)) return null;
  return Math.max(0, ((job.total_steps - job.step) * elapsed) / job.step);
}
