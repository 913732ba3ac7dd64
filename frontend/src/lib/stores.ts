/** Reducers for the `jobs` and `cluster` topics and a job's log tail. */
import type { HostUpdate, Job, LogLine, Node } from "../api/types";

/** A job view's `updated_at` (changes on every update, progress included) as a number. */
const updatedAt = (job: Job): number => Date.parse(job.updated_at);

/** Replace a job unless the incoming copy is provably older. */
export function upsertJob(jobs: Map<number, Job>, job: Job): boolean {
  const held = jobs.get(job.id);
  if (held && updatedAt(job) < updatedAt(held)) return false;
  jobs.set(job.id, job);
  return true;
}

/** A `jobs` snapshot replaces the whole list (jobs may have vanished while away). */
export function jobsFromSnapshot(list: Job[]): Map<number, Job> {
  const jobs = new Map<number, Job>();
  for (const job of list) upsertJob(jobs, job);
  return jobs;
}

/** Newest first, the way the board lists them. */
export function sortedJobs(jobs: Map<number, Job>): Job[] {
  return [...jobs.values()].sort((a, b) => b.id - a.id);
}

/** Log tail: deduped by (attempt, rank, stream, seq), ordered by time, capped. */
export class LogTail {
  private readonly keys = new Set<string>();
  lines: LogLine[] = [];

  constructor(private readonly capacity = 1_000) {}

  /** Returns true when any line was new. */
  apply(lines: LogLine[]): boolean {
    const before = this.lines.length;
    let ordered = true; // the new lines all come after the held ones, in order: no sort needed
    for (const line of lines) {
      const key = logKey(line);
      if (this.keys.has(key)) continue;
      this.keys.add(key);
      const last = this.lines[this.lines.length - 1];
      if (last && byTime(last, line) > 0) ordered = false;
      this.lines.push(line);
    }
    if (this.lines.length === before) return false;
    // a live job's lines arrive in order, ~170 messages a second: sorting the whole tail on
    // each (and shifting it line by line) was a cost per message of the job page (issue #33)
    if (!ordered) this.lines.sort(byTime);
    const over = this.lines.length - this.capacity;
    if (over > 0) for (const old of this.lines.splice(0, over)) this.keys.delete(logKey(old));
    return true;
  }
}

const logKey = (l: LogLine): string => `${l.attempt_id}:${l.rank}:${l.stream}:${l.seq}`;
const byTime = (a: LogLine, b: LogLine): number => a.time - b.time || a.rank - b.rank || a.seq - b.seq;

/** Nodes with each heartbeat's machine load, data disk (when it says) and time applied. */
export function withHosts(nodes: Node[], hosts: HostUpdate[]): Node[] {
  const latest = new Map(hosts.map((h) => [h.node, h]));
  return nodes.map((node) => {
    const update = latest.get(node.name);
    if (!update) return node;
    const { node: _name, time, disk, ...host } = update;
    const seen = disk === undefined ? {} : { disk };
    return { ...node, host, ...seen, last_heartbeat: new Date(time * 1000).toISOString() };
  });
}
