"""The worker side of an attempt's life: each node claims its slice once, then reports its end.

An attempt is a gang spread over one slice per node. It runs once the first slice is
claimed, fails as soon as one slice fails (the others are told to stop), and succeeds
when every slice has succeeded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis
from sqlalchemy import exists, select, update
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.jobs.attempt_end import AttemptEnd, advance_job, end_slices
from backend.jobs.attempt_states import (
    LIVE_ATTEMPT_VALUES,
    AttemptState,
    SliceState,
    attempt_move,
    set_attempt_state,
    set_slice_state,
    slice_move,
)
from backend.jobs.checkpoint_trust import accepted_checkpoint, refusal
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.jobs.states import JobState, transition
from backend.nodes.models import Node, NodeState
from backend.nodes.multihost import gang_addresses
from backend.signals import request_stop
from workers.contract.protocol import AttemptOutcome, StopRequest

log = logging.getLogger(__name__)


class AttemptNotFound(LookupError):
    pass


class PortRefused(ValueError):
    """A rendezvous port from a node that does not host rank 0 (a 422 naming the field)."""

    loc = ("master_port",)


def slices_of(session: Session, attempt_id: int, *, fresh: bool = False) -> Sequence[AttemptSlice]:
    """An attempt's slices by node rank (`fresh`: re-read, not the session's copies)."""
    query = (
        select(AttemptSlice)
        .where(AttemptSlice.attempt_id == attempt_id)
        .order_by(AttemptSlice.node_rank)
    )
    return session.scalars(query.execution_options(populate_existing=fresh)).all()


def attempt_on(session: Session, *, attempt_id: int, node: str) -> Attempt:
    """The attempt, if one of its slices is on `node`; AttemptNotFound otherwise (no probing)."""
    return _attempt_with_slices(session, attempt_id=attempt_id, node=node)[0]


def _attempt_with_slices(
    session: Session, *, attempt_id: int, node: str
) -> tuple[Attempt, Sequence[AttemptSlice]]:
    """`attempt_on`, and the slices it read (a claim needs them again: one query, not three)."""
    attempt = session.get(Attempt, attempt_id)
    slices = slices_of(session, attempt_id) if attempt is not None else ()
    if attempt is None or not any(s.node_name == node for s in slices):
        raise AttemptNotFound(f"attempt {attempt_id} not found")
    return attempt, slices


def claim(
    session: Session,
    *,
    attempt_id: int,
    node: str,
    instance: str | None = None,
    master_port: int | None = None,
) -> bool:
    """Compare-and-set this node's slice scheduled → running, as one statement.

    The slice wins only while its attempt is live and current and its job still wants it
    to run, and only for the node's current incarnation; any number of nodes claiming
    their own slices at once all win; duplicates, stale tasks and old incarnations lose.
    The node hosting rank 0 sends the rendezvous port it chose (free there now): a won
    claim records it for the other nodes (`rendezvous`).
    """
    # the slices' nodes, ranks and devices do not change in a claim: read once
    attempt, slices = _attempt_with_slices(session, attempt_id=attempt_id, node=node)
    hosts_rank0 = any(s.node_name == node and s.node_rank == 0 for s in slices)
    if master_port is not None and not hosts_rank0:
        raise PortRefused("only the node hosting rank 0 (node rank 0) chooses the rendezvous port")
    current = exists().where(
        Job.id == Attempt.job_id,
        Job.attempt == Attempt.number,
        Job.state.in_([JobState.scheduled, JobState.running]),
    )
    live = exists().where(Attempt.id == attempt_id, Attempt.state.in_(LIVE_ATTEMPT_VALUES), current)
    incarnation = exists().where(Node.name == node, Node.state == NodeState.up)
    if instance is not None:
        incarnation = exists().where(
            Node.name == node, Node.state == NodeState.up, Node.instance == instance
        )
    frm, to = slice_move(SliceState.scheduled, SliceState.running)
    won = session.execute(
        update(AttemptSlice)
        .where(
            AttemptSlice.attempt_id == attempt_id,
            AttemptSlice.node_name == node,
            AttemptSlice.state == frm,
            live,
            incarnation,
        )
        .values(state=to, claimed_at=utcnow(), instance=instance)
        .execution_options(synchronize_session=False)
    ).rowcount  # type: ignore[attr-defined]
    if not won:
        session.rollback()
        return False
    if master_port is not None:
        session.execute(
            update(Attempt)
            .where(Attempt.id == attempt_id)
            .values(master_port=master_port)
            .execution_options(synchronize_session=False)
        )
    was, now = attempt_move(AttemptState.scheduled, AttemptState.running)
    first = session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.state == was)
        .values(state=now, claimed_at=utcnow())
        .execution_options(synchronize_session=False)
    ).rowcount  # type: ignore[attr-defined]
    if first:
        session.refresh(attempt)
        job = session.get_one(Job, attempt.job_id, populate_existing=True)
        if job.state == JobState.scheduled:
            where = placement_text(slices)
            message = f"attempt {attempt.number} started on {where}"
            session.add(transition(job, JobState.running, message=message, attempt_id=attempt.id))
    session.commit()
    return True


def rendezvous(session: Session, *, attempt_id: int, node: str) -> tuple[int | None, bool]:
    """The attempt's rendezvous port (None until rank 0's node claimed) and whether it is live."""
    attempt = attempt_on(session, attempt_id=attempt_id, node=node)
    session.refresh(attempt)
    return attempt.master_port or None, attempt.state in LIVE_ATTEMPT_VALUES


def finish(
    session: Session,
    client: redis.Redis,
    *,
    attempt_id: int,
    node: str,
    outcome: AttemptOutcome,
) -> Job:
    """Record how `node`'s slice ended and, once that decides the attempt, move the job on.

    Only the incarnation that claimed the slice may report it, and only while it runs: a
    fenced node's late report changes nothing (its checkpoint is never resumed from).
    """
    attempt = attempt_on(session, attempt_id=attempt_id, node=node)
    # one report at a time per attempt (a row lock on PostgreSQL, the write lock on SQLite),
    # and every read after it fresh: two nodes finishing at the same instant each read the
    # other's slice as still running, and the attempt never ended
    session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id)
        .values(state=Attempt.state)
        .execution_options(synchronize_session=False)
    )
    session.refresh(attempt)
    job = session.get_one(Job, attempt.job_id, populate_existing=True)
    slices = slices_of(session, attempt_id, fresh=True)
    reported = [
        s
        for s in slices
        if s.node_name == node
        and s.state == SliceState.running
        and (outcome.instance is None or s.instance in (None, outcome.instance))
    ]
    if not reported:
        return job  # a repeated, late or fenced report: it counts for nothing
    set_slice_state(reported[0], outcome.outcome)
    reported[0].finished_at = utcnow()
    data_dir = session.scalars(select(Node.data_dir).where(Node.name == node)).first()
    checkpoint = accepted_checkpoint(
        outcome.last_checkpoint, data_dir=data_dir, job_id=job.id, node=node
    )
    if checkpoint and attempt.state == AttemptState.running:
        attempt.last_checkpoint = checkpoint
    if attempt.state != AttemptState.running:
        session.commit()
        return job
    if outcome.outcome == "succeeded" and any(s.state != SliceState.succeeded for s in slices):
        session.commit()
        return job  # the other nodes' ranks are still finishing
    if outcome.platform_fault and outcome.reason:  # name every node's address: which failed?
        gang = gang_addresses(session, [s.node_name for s in slices])
        outcome = outcome.model_copy(update={"reason": f"{outcome.reason} [gang: {gang}]"})
    set_attempt_state(attempt, outcome.outcome)
    attempt.finished_at = utcnow()
    attempt.exit_reason = outcome.reason
    if end_slices(session, attempt, running_to=SliceState.withdrawn):
        request_stop(client, attempt_id=attempt.id, action=StopRequest.cancel)
    if job.attempt == attempt.number:
        advance_job(session, job, attempt, AttemptEnd.reported(outcome))
    session.commit()
    return job


def newest_checkpoints(session: Session, job_ids: Sequence[int]) -> dict[int, str]:
    """The newest checkpoint of each job that lies in its own dir on a node it ran on."""
    rows = session.execute(
        select(Attempt.job_id, Attempt.id, Attempt.last_checkpoint, Node.data_dir)
        .join(AttemptSlice, AttemptSlice.attempt_id == Attempt.id)
        .outerjoin(Node, Node.name == AttemptSlice.node_name)
        .where(Attempt.job_id.in_(job_ids), Attempt.last_checkpoint.is_not(None))
        .order_by(Attempt.job_id, Attempt.number)
    ).all()
    accepted: dict[int, tuple[int, str]] = {}  # attempt id: (job id, path), oldest first
    refused: dict[int, tuple[int, str]] = {}
    for job_id, attempt_id, stored, data_dir in rows:
        path = str(stored)  # never None: the query asks for set ones
        verdict = refusal(path, data_dir=data_dir, job_id=job_id)
        (refused if verdict else accepted)[attempt_id] = (job_id, path)
    for attempt_id, (job_id, path) in refused.items():
        if attempt_id not in accepted:
            log.warning("job %d: not resuming from attempt %d's %r", job_id, attempt_id, path[:300])
    newest = {job_id: path for job_id, path in accepted.values()}  # a later attempt overwrites
    return newest


def newest_checkpoint(session: Session, job_id: int) -> str | None:
    """The newest checkpoint any attempt of the job left in its own dir, to resume from."""
    return newest_checkpoints(session, [job_id]).get(job_id)


def placement_text(slices: Sequence[AttemptSlice]) -> str:
    """Where an attempt runs, for the timeline: node and devices of each slice."""
    return "; ".join(f"{s.node_name} devices {list(s.devices)}" for s in slices)
