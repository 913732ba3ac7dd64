"""A job's whole stored log as text, streamed for download; how many lines the cap dropped."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.jobs.models import Attempt
from backend.telemetry.models import LogLine


def log_text(session: Session, *, job_id: int, attempt: int | None = None) -> Iterator[str]:
    """Every stored line of the job (or of one attempt number), in the order it was stored.

    Each line reads `[attempt 1 rank 0] text`, stderr marked `[attempt 1 rank 0 stderr]`;
    yielded in chunks of a few thousand lines, so a long log is never held whole.
    """
    query = (
        select(Attempt.number, LogLine.rank, LogLine.stream, LogLine.line)
        .join(Attempt, Attempt.id == LogLine.attempt_id)
        .where(Attempt.job_id == job_id)
        .order_by(Attempt.number, LogLine.id)
        .execution_options(yield_per=5_000)
    )
    if attempt is not None:
        query = query.where(Attempt.number == attempt)
    for partition in session.execute(query).partitions():
        yield "".join(
            f"[attempt {number} rank {rank}{' stderr' if stream == 'stderr' else ''}] {line}\n"
            for number, rank, stream, line in partition
        )


def log_filename(*, job_id: int, attempt: int | None) -> str:
    return f"job-{job_id}.log" if attempt is None else f"job-{job_id}-attempt-{attempt}.log"


def dropped_lines(session: Session, *, job_id: int) -> int:
    """The job's oldest log lines deleted over the per-attempt cap, over all its attempts."""
    query = select(func.coalesce(func.sum(Attempt.log_lines_dropped), 0)).where(
        Attempt.job_id == job_id
    )
    return int(session.scalar(query) or 0)
