"""Turning a sweep and its trials into the API's view: the trials table and the best so far."""

from __future__ import annotations

from sqlalchemy.orm import Session

from backend.auth.models import User
from backend.db import fields_of
from backend.jobs.states import PHASES, JobPhase, JobState
from backend.sweeps.models import Sweep
from backend.sweeps.schemas import SweepIn, SweepOut, TrialOut
from backend.sweeps.service import trials_of
from backend.sweeps.stopping import rung_values
from backend.telemetry.series.reads import series


def describe_sweep(session: Session, sweep: Sweep) -> SweepOut:
    """The sweep with one row per trial (pending ones too) and its best trial so far."""
    config = SweepIn.model_validate(sweep.config)
    jobs = {job.sweep_trial: job for job in trials_of(session, sweep.id)}
    rows = []
    for number, setting in enumerate(sweep.trials, start=1):
        job = jobs.get(number)
        if job is None:
            rows.append(
                TrialOut(
                    number=number,
                    setting=setting,
                    job_id=None,
                    state="pending",
                    phase=JobPhase.waiting,
                    step=0,
                    value=None,
                    rungs={},
                    early_stop=None,
                )
            )
            continue
        values = series(session, job_id=job.id, name=config.metric)["value"]
        rows.append(
            TrialOut(
                number=number,
                setting=setting,
                job_id=job.id,
                state=JobState(job.state),
                phase=PHASES[JobState(job.state)],
                step=job.step,
                value=values[-1] if values else None,
                rungs=rung_values(session, sweep=sweep, job_id=job.id),
                early_stop=job.early_stop,
            )
        )
    scored = [row for row in rows if row.value is not None]
    # a trial that ran every step beats one stopped early, whose last value is from an
    # earlier step (a noisy minibatch there is no measure of the setting); only while none
    # has finished is the best so far a running or stopped one
    finished = [row for row in scored if row.state == JobState.succeeded]
    scored = finished or scored
    sign = 1.0 if config.mode == "min" else -1.0
    best = min(scored, key=lambda row: sign * (row.value or 0.0)) if scored else None
    owner = session.get(User, sweep.owner_id)
    return SweepOut(
        owner=owner.username if owner else "?",
        parameters=list(config.parameters),
        trials=rows,
        best=best,
        **fields_of(config, "method metric mode early_stopping"),
        **fields_of(sweep, "id name state max_concurrency created_at finished_at"),
    )
