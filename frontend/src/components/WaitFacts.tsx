/** Why a queued job waits, and its place in the queue (the scheduler's count: 1 = placed next);
 * a scheduled job the executor still holds (Slurm's pending reason) says why too. */
import type { Job } from "../api/types";

export function WaitFacts({ job }: { job: Job }) {
  if (job.state === "scheduled" && job.wait_reason)
    return (
      <>
        <dt>Waiting</dt>
        <dd data-testid="job-wait-reason">{job.wait_reason}</dd>
      </>
    );
  if (job.state !== "queued") return null;
  return (
    <>
      <dt>Waiting</dt>
      <dd data-testid="job-wait-reason">{job.wait_reason ?? <span class="muted">about to be scheduled</span>}</dd>
      <dt>Queue position</dt>
      <dd data-testid="job-queue-position">
        {job.queue_position == null ? <span class="muted">not placed yet</span> : `${job.queue_position} (1 = placed next)`}
      </dd>
    </>
  );
}
