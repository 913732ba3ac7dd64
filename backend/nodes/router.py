"""REST routes for nodes (the cluster view) and for node agents (register, heartbeat, attempts)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, status

from backend.auth.deps import AdminDep, NodeDep, ObjectId, ReaderDep, SessionDep, SettingsDep
from backend.jobs import attempts, cluster, fencing
from backend.jobs.schemas import ClaimIn, ClaimOut, FinishOut, RendezvousOut
from backend.nodes import control, service, trust
from backend.nodes.deployment import deployment_id
from backend.nodes.schemas import ExecutorOut, NodeList, NodeOut, RegisteredOut
from backend.signals import announce_jobs, announce_nodes, wake_scheduler
from backend.telemetry.live import publish_live
from workers.contract.protocol import (
    AttemptOutcome,
    Heartbeat,
    HeartbeatReply,
    NodeRegistration,
)

router = APIRouter(prefix="/api", tags=["nodes"])


@router.get("/nodes", response_model=NodeList)
def list_nodes(_: ReaderDep, session: SessionDep, request: Request) -> NodeList:
    """Nodes, their devices, and which job and rank holds each device; under Slurm, also
    Slurm's own nodes and their state."""
    manager = cluster.manager_view(request.app.state.redis)
    return NodeList(nodes=cluster.describe_nodes(session), manager=manager)


@router.get("/executor", response_model=ExecutorOut)
def executor_status(_: ReaderDep, settings: SettingsDep, request: Request) -> ExecutorOut:
    """Which executor runs attempts and whether its cluster manager answers (one Redis read:
    the board and a job's page ask it every 10 s under Slurm)."""
    return cluster.manager_warning(request.app.state.redis, executor=settings.executor)


@router.post("/nodes/{name}/drain", response_model=NodeOut)
def drain_node(name: str, request: Request, _: AdminDep, session: SessionDep) -> NodeOut:
    """Admin: place no new jobs on this node; running ones finish."""
    return _set_drained(session, request, name, drained=True)


@router.post("/nodes/{name}/undrain", response_model=NodeOut)
def undrain_node(name: str, request: Request, _: AdminDep, session: SessionDep) -> NodeOut:
    """Admin: accept new jobs on this node again."""
    return _set_drained(session, request, name, drained=False)


def _set_drained(session: SessionDep, request: Request, name: str, *, drained: bool) -> NodeOut:
    control.set_drained(session, name=name, drained=drained)
    announce_nodes(request.app.state.redis)
    wake_scheduler(request.app.state.redis)
    return cluster.describe_nodes(session, name=name)[0]


@router.post("/nodes/register", response_model=RegisteredOut)
def register_node(
    body: NodeRegistration, request: Request, principal: NodeDep, session: SessionDep
) -> RegisteredOut:
    """A node agent announces itself and its devices (only as the node its token names)."""
    _acting_node(principal, body.name)
    client = request.app.state.redis
    node, changed = fencing.register(session, client, registration=body)
    announce_nodes(client)
    announce_jobs(client, changed)
    wake_scheduler(client)
    view = cluster.describe_nodes(session, name=node.name)[0]
    return RegisteredOut(**view.model_dump(), deployment=deployment_id(session))


@router.post("/nodes/{name}/heartbeat", response_model=HeartbeatReply)
def heartbeat(
    name: str, body: Heartbeat, request: Request, principal: NodeDep, session: SessionDep
) -> HeartbeatReply:
    """A node agent is alive: it learns which of its attempts to stop; its load goes live."""
    _acting_node(principal, name)
    client = request.app.state.redis
    lease = request.app.state.settings.heartbeat_timeout
    node, reply, changed = fencing.heartbeat(
        session, client, name=name, beat=body, lease_seconds=lease
    )
    if changed:
        announce_jobs(client, changed)
        wake_scheduler(client)
    view = service.host_view(node) if not reply.reregister else None
    if view is not None:
        update = {"node": name, "time": node.last_heartbeat.timestamp(), **view.model_dump()}
        disk = service.disk_view(node)  # free space changes with every beat: shown live too
        update["disk"] = disk.model_dump() if disk is not None else None
        publish_live(client, "cluster", {"hosts": [update]})
    return reply


@router.post("/attempts/{attempt_id}/claim", response_model=ClaimOut)
def claim_attempt(
    attempt_id: ObjectId, body: ClaimIn, request: Request, principal: NodeDep, session: SessionDep
) -> ClaimOut:
    """Exactly one claim of a scheduled attempt wins; any other gets 409 and must not start."""
    node = _acting_node(principal, body.node)
    won = attempts.claim(
        session,
        attempt_id=attempt_id,
        node=node,
        instance=body.instance,
        master_port=body.master_port,
    )
    if not won:
        raise HTTPException(
            status.HTTP_409_CONFLICT, "attempt is not claimable (stale, duplicate or stopped)"
        )
    session.commit()
    announce_jobs(request.app.state.redis, [_job_of(session, attempt_id)])
    port, _ = attempts.rendezvous(session, attempt_id=attempt_id, node=node)
    return ClaimOut(claimed=True, master_port=port)


@router.get("/attempts/{attempt_id}/rendezvous", response_model=RendezvousOut)
def attempt_rendezvous(
    attempt_id: ObjectId, principal: NodeDep, session: SessionDep
) -> RendezvousOut:
    """Where a gang meets: the port the node hosting rank 0 chose when it claimed."""
    node = _acting_node(principal, None)
    port, live = attempts.rendezvous(session, attempt_id=attempt_id, node=node)
    return RendezvousOut(master_port=port, live=live)


@router.post("/attempts/{attempt_id}/finish", response_model=FinishOut)
def finish_attempt(
    attempt_id: ObjectId,
    body: AttemptOutcome,
    request: Request,
    principal: NodeDep,
    session: SessionDep,
) -> FinishOut:
    """The supervisor reports how its node's slice ended; the job moves on accordingly."""
    node = _acting_node(principal, body.node)
    job = attempts.finish(
        session, request.app.state.redis, attempt_id=attempt_id, node=node, outcome=body
    )
    announce_jobs(request.app.state.redis, [job.id])
    wake_scheduler(request.app.state.redis)
    return FinishOut(state=job.state)


def _acting_node(principal: NodeDep, claimed: str | None) -> str:
    return trust.acting_node(principal, claimed)


def _job_of(session: SessionDep, attempt_id: int) -> int:
    from backend.jobs.models import Attempt

    return session.get_one(Attempt, attempt_id).job_id
