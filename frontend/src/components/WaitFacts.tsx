/** Why a queued job waits, and its place in the queue (the scheduler's, else the board's order). */
import type { Job } from "../api/types";
import { useJobs } from "../data";
import { queueOrder } from "../lib/board";

export function WaitFacts({ job }: { job: Job }) {
  const jobs = useJobs();
  if (job.state !== "queued") return null;
  const queue = jobs ? queueOrder(new Map(jobs).set(job.id, job).values()) : [];
  // the scheduler's own count (fair share included) once it has placed the queue
  const position = job.queue_position ?? queue.findIndex((j) => j.id === job.id) + 1;
  return (
    <>
      <dt>Waiting</dt>
      <dd data-testid="job-wait-reason">{job.wait_reason ?? <span class="muted">about to be scheduled</span>}</dd>
      <dt>Queue position</dt>
      <dd data-testid="job-queue-position">{position < 1 ? "…" : `${position} of ${Math.max(queue.length, position)}`}</dd>
    </>
  );
}
