"""After submit: rename, notes, tags, archive; and the board's bulk cancel / archive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import redis
from pydantic import BaseModel, Field, StrictBool, field_validator
from sqlalchemy.orm import Session

from backend.auth.deps import RowId
from backend.auth.service import Principal
from backend.jobs.models import Job, JobEvent
from backend.jobs.service import JobNotFound, get_job, stop
from backend.jobs.states import IllegalTransition
from backend.signals import announce_jobs
from workers.contract.spec import check_tags, clean_text

MAX_NOTES = 20_000
MAX_BULK = 500


class JobEdit(BaseModel):
    """What may change after submit; fields left out stay as they are."""

    model_config = {"extra": "forbid"}

    name: str | None = Field(None, min_length=1, max_length=128)
    notes: str | None = Field(None, max_length=MAX_NOTES, description="markdown")
    tags: list[str] | None = Field(None, max_length=32)
    archived: StrictBool | None = None

    @field_validator("name")
    @classmethod
    def _name_is_clean(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("name must not be blank")
        return None if value is None else clean_text(value, "name")

    @field_validator("tags")
    @classmethod
    def _tags_are_plain(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_tags(value)


class BulkIn(BaseModel):
    model_config = {"extra": "forbid"}

    ids: list[RowId] = Field(min_length=1, max_length=MAX_BULK)
    action: Literal["cancel", "archive", "unarchive"]


class BulkResult(BaseModel):
    id: int
    ok: bool
    detail: str = ""


def edit(
    session: Session, client: redis.Redis, *, principal: Principal, job: Job, change: JobEdit
) -> Job:
    """Apply a rename, notes, tags or archive flag; one timeline event names what changed."""
    changed: list[str] = []
    if change.name is not None and change.name != job.name:
        changed.append(f"renamed from {job.name!r}")
        job.name = change.name
    if change.notes is not None and change.notes != (job.notes or ""):
        changed.append("notes edited")
        job.notes = change.notes
    if change.tags is not None and change.tags != job.spec_model.tags:
        changed.append(f"tags set to {', '.join(change.tags) or 'none'}")
        job.spec = {**job.spec, "tags": change.tags}
    if change.archived is not None and change.archived != job.archived:
        changed.append("archived" if change.archived else "restored from the archive")
        job.archived = change.archived
    if changed:
        message = f"{'; '.join(changed)} by {principal.username}"
        session.add(JobEvent(job_id=job.id, kind="edited", message=message))
        session.commit()
        announce_jobs(client, [job.id])
    return job


def bulk(
    session: Session, client: redis.Redis, *, principal: Principal, ids: Sequence[int], action: str
) -> list[BulkResult]:
    """Cancel, archive or restore many jobs; each id answers for itself (a missing or
    finished one does not stop the rest)."""
    results = []
    for job_id in dict.fromkeys(ids):
        try:
            job = get_job(session, principal=principal, job_id=job_id)
            if action == "cancel":
                stop(session, client, principal=principal, job=job, action="cancel")
            else:
                edit(
                    session,
                    client,
                    principal=principal,
                    job=job,
                    change=JobEdit(archived=action == "archive"),
                )
            results.append(BulkResult(id=job_id, ok=True))
        except (JobNotFound, IllegalTransition) as err:
            session.rollback()
            results.append(BulkResult(id=job_id, ok=False, detail=str(err)))
    return results
