"""Storing a job's provenance from its node, and comparing it across jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from backend.jobs.attempts import attempt_on
from backend.jobs.models import Job
from workers.contract.provenance import ProvenanceIn

#: the flattened fields compare lines up (packages are compared one by one)
FIELDS = (
    "recorded.template",
    "recorded.trainboard",
    "recorded.node",
    "recorded.script.entrypoint",
    "recorded.script.sha256",
    "recorded.script.files",
    "recorded.script.git.commit",
    "recorded.script.git.branch",
    "recorded.script.git.dirty",
    "recorded.script.git.diff",
    "reported.python",
    "reported.executable",
    "reported.torch",
    "reported.cuda",
)


def record(session: Session, *, attempt_id: int, node: str, body: ProvenanceIn) -> Job:
    """Keep what the node of the job's current attempt sent (a late, older attempt's is
    ignored); the reported half is kept apart: the job's own interpreter printed it."""
    attempt = attempt_on(session, attempt_id=attempt_id, node=node)
    job = session.get_one(Job, attempt.job_id)
    if job.attempt == attempt.number:
        job.provenance = {**body.recorded.model_dump(mode="json"), "attempt": attempt.number}
        reported = body.reported.model_dump(mode="json") if body.reported else None
        job.reported_env = reported or {"error": body.reported_error or "not reported"}
        session.commit()
    return job


def view(job: Job) -> dict[str, Any]:
    """A job's provenance as the API returns it (None for parts not recorded yet)."""
    return {"job_id": job.id, "recorded": job.provenance, "reported": job.reported_env}


def differences(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Each field (and package) whose value is not the same for every job, in FIELDS order."""
    views = [view(job) for job in jobs]
    rows = []
    for field in FIELDS:
        values = [_at(v, field) for v in views]
        if len({repr(x) for x in values}) > 1:
            rows.append({"field": field, "values": values})
    packages = [_packages(v) for v in views]
    for name in sorted({n for p in packages for n in p}):
        versions = [p.get(name) for p in packages]
        if len(set(versions)) > 1:
            rows.append({"field": f"package {name}", "values": versions})
    return rows


def _at(value: Any, path: str) -> Any:
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _packages(view: dict[str, Any]) -> dict[str, str]:
    listed = _at(view, "reported.packages") or []
    pairs = (p.partition("==") for p in listed if isinstance(p, str))
    return {name: version for name, _, version in pairs}
