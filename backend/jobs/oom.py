"""Out-of-memory remediation: restart with half the micro-batch, same global batch (on_oom)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.models import Job, JobEvent
from backend.jobs.states import JobState, transition
from workers.contract.oom import is_oom, shape_after

#: the job event (and webhook event) of one remediation
KIND = "oom_remediation"
#: seconds before the smaller attempt is placed (not a crash loop: the shape changed)
RESTART_SECONDS = 1.0


def remediate(session: Session, job: Job, *, reason: str, attempt_id: int | None) -> bool:
    """Restart an out-of-memory job with half the micro-batch, when its spec asks and can.

    True when it did (a `oom_remediation` event saying what changed, then `restarting`;
    not counted against max_restarts: the spec's max_oom_reductions bounds it).
    """
    spec = job.spec_model
    if not is_oom(reason) or spec.health.on_oom != "reduce_microbatch":
        return False
    done, limit = job.oom_reductions, spec.health.max_oom_reductions
    before, after = shape_after(job.spec, done), shape_after(job.spec, done + 1)
    if done >= limit or before is None or after is None:
        return False
    global_batch = after.batch_size * after.grad_accum * spec.parallelism.data_parallel_degree
    message = (
        f"out of memory: restarting from the newest checkpoint with micro-batch "
        f"{after.batch_size} (was {before.batch_size}) x accumulation {after.grad_accum} "
        f"(was {before.grad_accum}), global batch {global_batch} kept "
        f"(reduction {done + 1} of {limit})"
    )
    job.oom_reductions = done + 1  # the next attempt runs the smaller shape
    session.add(JobEvent(job_id=job.id, attempt_id=attempt_id, kind=KIND, message=message))
    job.restart_at = utcnow() + timedelta(seconds=RESTART_SECONDS)
    session.add(
        transition(
            job,
            JobState.restarting,
            message=f"{message}; after: {reason}",
            reason=reason,
            attempt_id=attempt_id,
        )
    )
    return True
