"""Node incarnations and fencing: which attempts a node may run, decided by the control plane.

A node agent's registration and heartbeat come through here (`register`, `heartbeat`):
backend.nodes.service records the node's facts, this ends or stops what it may no longer run.

Every worker start is a new incarnation of its node (a new `instance` id at registration).
A slice records the instance that claimed it: (attempt id, instance) is the fencing token.
A node learns at every heartbeat which attempts it runs but no longer owns (ended, lost,
claimed by another incarnation) and kills them before anything else; the control plane
ends the attempts a node should run but does not. The booking invariant is repaired here
too: a live slice of an attempt that is no longer live is a bug, logged and fixed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import as_utc, utcnow
from backend.jobs.attempt_end import end_attempt
from backend.jobs.attempt_states import (
    LIVE_ATTEMPT_VALUES,
    LIVE_SLICE_VALUES,
    AttemptState,
    SliceState,
    set_slice_state,
)
from backend.jobs.models import Attempt, AttemptSlice
from backend.nodes import service as nodes
from backend.nodes.models import Node
from workers.contract.protocol import Heartbeat, HeartbeatReply, NodeRegistration

log = logging.getLogger(__name__)

#: a claimed slice the node does not list yet: its ranks may still be starting
START_GRACE = timedelta(seconds=10)


def live_slices_on(session: Session, node: str) -> list[tuple[AttemptSlice, Attempt]]:
    """The live slices on a node with their attempts."""
    rows = session.execute(
        select(AttemptSlice, Attempt)
        .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
        .where(AttemptSlice.node_name == node, AttemptSlice.state.in_(LIVE_SLICE_VALUES))
    ).all()
    return [(part, attempt) for part, attempt in rows]


def end_node_attempts(
    session: Session, client: redis.Redis, node: str, *, reason: str, instance: str | None = None
) -> set[int]:
    """End every attempt with a live slice on `node` (of `instance`, if given): lost, restarted
    from the newest checkpoint without spending the user's restarts. Their job ids."""
    changed: set[int] = set()
    for part, attempt in live_slices_on(session, node):
        if instance is not None and part.instance not in (None, instance):
            continue
        if _lose(session, client, attempt, reason=reason):
            changed.add(attempt.job_id)
    return changed


def reconcile(
    session: Session,
    client: redis.Redis,
    *,
    node: str,
    instance: str,
    running: Iterable[int],
) -> tuple[list[int], set[int]]:
    """Compare what a node runs with what it owns: (attempts it must stop, jobs changed)."""
    running = set(running)
    owned = {
        part.attempt_id: (part, attempt)
        for part, attempt in live_slices_on(session, node)
        if part.state == SliceState.running and part.instance == instance
    }
    stop = sorted(running - set(owned))
    changed: set[int] = set()
    now = utcnow()
    for attempt_id, (part, attempt) in owned.items():
        started = as_utc(part.claimed_at) if part.claimed_at else now
        if attempt_id in running or now - started < START_GRACE:
            continue
        if _lose(
            session, client, attempt, reason=f"node {node} no longer runs attempt {attempt.number}"
        ):
            changed.add(attempt.job_id)
    return stop, changed


def _lose(session: Session, client: redis.Redis, attempt: Attempt, *, reason: str) -> bool:
    """End a still-live attempt as lost (the platform's fault: no restart spent); did it?"""
    if attempt.state not in LIVE_ATTEMPT_VALUES:
        return False
    end_attempt(
        session, client, attempt, state=AttemptState.lost, reason=reason, platform_fault=True
    )
    return True


def repair_bookings(session: Session) -> set[int]:
    """Free any live slice whose attempt is not live (should never happen: logged as a bug)."""
    broken = session.execute(
        select(AttemptSlice, Attempt)
        .join(Attempt, Attempt.id == AttemptSlice.attempt_id)
        .where(
            AttemptSlice.state.in_(LIVE_SLICE_VALUES),
            Attempt.state.not_in(LIVE_ATTEMPT_VALUES),
        )
    ).all()
    for part, attempt in broken:
        log.error(
            "bug: slice %d of %s attempt %d still booked devices %s on %s; withdrawn",
            part.id,
            attempt.state,
            attempt.id,
            list(part.devices),
            part.node_name,
        )
        set_slice_state(part, SliceState.withdrawn)
        part.finished_at = utcnow()
    return {attempt.job_id for _, attempt in broken}


def register(
    session: Session, client: redis.Redis, *, registration: NodeRegistration
) -> tuple[Node, set[int]]:
    """A node (re)registers: its facts recorded, and a new incarnation's predecessor's
    attempts ended (lost: restarted without spending a restart); (node, jobs changed)."""
    node, replaced = nodes.record_registration(session, client, registration=registration)
    changed = (
        set()
        if replaced is None
        else end_node_attempts(session, client, registration.name, reason=replaced)
    )
    session.commit()
    return node, changed


def heartbeat(
    session: Session, client: redis.Redis, *, name: str, beat: Heartbeat, lease_seconds: float
) -> tuple[Node, HeartbeatReply, set[int]]:
    """Record a heartbeat and reconcile: (node, what the node must do now, jobs changed)."""
    node, refused = nodes.record_heartbeat(
        session, client, name=name, beat=beat, lease_seconds=lease_seconds
    )
    if refused is not None:
        return node, refused, set()
    stop, changed = reconcile(
        session, client, node=name, instance=beat.instance, running=beat.attempts
    )
    session.commit()
    reply = HeartbeatReply(drained=node.drained, stop=stop, lease_seconds=lease_seconds)
    return node, reply, changed
