"""The early-stopping pass: judge each running trial at each rung it has passed, once.

Every verdict is a timeline event of the trial (kind `rung` when it goes on,
`early_stopped` when it is stopped), which is also how a rung is known to be judged. A
rung that too few trials have reached yet is not judged: it waits (the trial training
on) until enough have, so the first trial to reach a rung is judged when a second does.
"""

from __future__ import annotations

from functools import cache

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.jobs import service as jobs
from backend.jobs.models import Job, JobEvent
from backend.jobs.states import IllegalTransition, JobState
from backend.sweeps.models import Sweep
from backend.sweeps.rules import judge, value_at
from backend.sweeps.schemas import SweepIn
from backend.sweeps.service import acting_as
from backend.telemetry.series.reads import series

VERDICTS = ("rung", "early_stopped")


def judge_rungs(session: Session, client: redis.Redis, *, sweep: Sweep, trials: list[Job]) -> int:
    """Judge the running trials at the rungs they have passed; the number stopped."""
    config = SweepIn.model_validate(sweep.config)
    rule = config.early_stopping
    if rule is None or sweep.state != "running":
        return 0
    judged = {
        (job_id, step)
        for job_id, step in session.execute(
            select(JobEvent.job_id, JobEvent.step).where(
                JobEvent.job_id.in_([t.id for t in trials]), JobEvent.kind.in_(VERDICTS)
            )
        )
    }

    @cache
    def curve(job_id: int) -> tuple[list[int], list[float]]:
        columns = series(session, job_id=job_id, name=config.metric)
        return columns["step"], columns["value"]

    def at(job: Job, rung: int) -> float | None:
        return value_at(*curve(job.id), rung)

    stopped = 0
    for job in trials:
        if job.state != JobState.running or job.early_stop:
            continue
        for index, rung in enumerate(rule.rungs, start=1):
            if job.step < rung or (job.id, rung) in judged:
                continue
            value = at(job, rung)
            if value is None:
                break  # its metric at this rung is not stored yet: next pass
            others = [v for o in trials if o.id != job.id for v in [at(o, rung)] if v is not None]
            verdict = judge(rule, mode=config.mode, value=value, others=others)
            if verdict.keep and verdict.threshold is None and len(others) + 1 < rule.min_trials:
                break  # too few trials at this rung yet: judged on a later pass, once there are
            where = f"rung {index} (step {rung}): {config.metric} {value:.4g}"
            if verdict.keep:
                limit = verdict.threshold
                cmp = "" if limit is None else f" within threshold {limit:.4g}"
                message = f"{where}{cmp} ({verdict.why}); goes on"
                session.add(JobEvent(job_id=job.id, kind="rung", step=rung, message=message))
                session.commit()
                continue
            worse = ">" if config.mode == "min" else "<"
            threshold = (
                "" if verdict.threshold is None else f" {worse} threshold {verdict.threshold:.4g}"
            )
            job.early_stop = f"stopped early at {where}{threshold} ({verdict.why})"
            session.add(
                JobEvent(job_id=job.id, kind="early_stopped", step=rung, message=job.early_stop)
            )
            session.commit()
            rule_name = f"sweep {sweep.id}'s early-stopping rule ({rule.rule})"
            try:
                jobs.stop(
                    session,
                    client,
                    principal=acting_as(session, sweep, rule_name),
                    job=job,
                    action="cancel",
                )
                stopped += 1
            except IllegalTransition:  # it ended meanwhile: its own outcome stands
                session.rollback()
                job.early_stop = None
                session.commit()
            break
    return stopped


def rung_values(session: Session, *, sweep: Sweep, job_id: int) -> dict[str, float]:
    """A trial's value at each rung it has passed (for the trials table)."""
    config = SweepIn.model_validate(sweep.config)
    if config.early_stopping is None:
        return {}
    columns = series(session, job_id=job_id, name=config.metric)
    found = {
        str(rung): value_at(columns["step"], columns["value"], rung)
        for rung in config.early_stopping.rungs
    }
    return {rung: v for rung, v in found.items() if v is not None}
