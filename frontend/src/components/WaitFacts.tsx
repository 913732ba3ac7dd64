/** Why a queued job waits, and where it stands in the queue (the board's scheduling order). */
import type { Job } from "../api/types";
import { useJobs } from "../data";
import { queueOrder } from "../lib/board";

export function WaitFacts({ job }: { job: Job }) {
  const jobs = useJobs();
  if (job.state !== "queued") return null;
  const queue = jobs ? queueOrder(new Map(jobs).set(job.id, job).values()) : [];
  const position = queue.findIndex((j) => j.id === job.id);
  return (
    <>
      <dt>Waiting</dt>
      <dd data-testid="job-wait-reason">{job.wait_reason ?? <span class="muted">about to be scheduled</span>}</dd>
      <dt>Queue position</dt>
      <dd data-testid="job-queue-position">{position < 0 ? "…" : `${position + 1} of ${queue.length}`}</dd>
    </>
  );
}
