"""Helpers for telemetry tests: rows for jobs and attempts, publishing, a live uvicorn server."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from sqlalchemy import func, insert, select
from websockets.sync.client import ClientConnection, connect

from backend.app import create_app
from backend.auth.models import User
from backend.auth.service import bootstrap_admin_token, ensure_admin, issue_token
from backend.config import Settings
from backend.db import Database
from backend.jobs.models import Attempt, Job
from backend.migrate import upgrade
from backend.nodes.deployment import deployment_id
from backend.telemetry.live.direct import WS_PROTOCOL
from backend.telemetry.models import MetricPoint
from tests.app_settings import ADMIN_TOKEN
from tests.workers.worker_helpers import free_port, wait_for
from workers.contract.keys import Keys

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

#: what an engine's start event says of a 1-rank run with 2 accumulation steps
FACTS = {
    "world_size": 1,
    "data_parallel": 1,
    "pipeline_stages": 1,
    "batch_size": 32,
    "accumulation": 2,
    "global_batch": 64,
}


def user_token(db: Database, username: str, *, scopes: str = "read") -> str:
    """A new plain user and a token of theirs with these scopes; the token's secret."""
    with db.session() as session:
        user = User(username=username, role="user")
        session.add(user)
        session.flush()
        return issue_token(session, user=user, scopes=scopes)[1]


def add_attempt(db: Database, *, owner: str = "alice", state: str = "running") -> tuple[int, int]:
    """A job in state with one running attempt on node-a; (job id, attempt id)."""
    with db.session() as session:
        user = session.scalar(select(User).where(User.username == owner))
        if user is None:
            user = User(username=owner, role="user")
            session.add(user)
            session.flush()
        spec = {"name": "telemetry-test", "template": "mlp", "hyperparameters": {"lr": 0.1}}
        job = Job(name="telemetry-test", owner_id=user.id, state=state, spec=spec)
        job.devices_requested = 1
        session.add(job)
        session.flush()
        attempt = Attempt(
            job_id=job.id, number=1, node_name="node-a", devices=[0], state="running", master_port=1
        )
        session.add(attempt)
        session.flush()
        return job.id, attempt.id


def point(attempt_id: int, step: int, *, rank: int = 0, name: str = "loss") -> dict[str, Any]:
    """One metric point whose value is a function of its key (so copies are recognisable)."""
    return {
        "attempt_id": attempt_id,
        "rank": rank,
        "step": step,
        "name": name,
        "value": 1.0 / (step + 1) + rank,
        "time": 1_700_000_000.0 + step,
    }


def insert_points(db: Database, rows: list[dict[str, Any]]) -> None:
    """Metric point rows written straight to the table, in one transaction."""
    with db.session() as session:
        session.execute(insert(MetricPoint), rows)


def count_points(db: Database) -> int:
    with db.session() as session:
        return int(session.scalar(select(func.count()).select_from(MetricPoint)) or 0)


def stored_steps(db: Database, attempt_id: int) -> list[int]:
    with db.session() as session:
        query = select(MetricPoint.step).where(MetricPoint.attempt_id == attempt_id)
        return sorted(session.scalars(query))


@dataclass
class LiveServer:
    """A uvicorn-served Trainboard in a thread of this process."""

    settings: Settings
    port: int
    db: Database = field(init=False)

    def __post_init__(self) -> None:
        self.db = Database(self.settings.db_url)

    def keys(self) -> Keys:
        """The Redis names of this server's deployment."""
        with self.db.session() as session:
            return Keys(deployment_id(session))

    @classmethod
    @contextlib.contextmanager
    def running(cls, settings: Settings) -> Iterator[LiveServer]:
        """Migrate, bootstrap the admin token, serve until the block ends."""
        upgrade(settings.db_url)
        server = cls(settings, free_port())
        with server.db.session() as session:
            bootstrap_admin_token(session, configured=ADMIN_TOKEN)
            ensure_admin(session)
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=server.port,
            log_level="warning",
            ws=WS_PROTOCOL,
        )
        uv = uvicorn.Server(config)
        thread = threading.Thread(target=uv.run, daemon=True)
        thread.start()
        wait_for(lambda: uv.started, timeout=30, what="uvicorn to start")
        try:
            yield server
        finally:
            uv.should_exit = True
            thread.join(10)
            server.db.dispose()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def websocket(self, token: str = ADMIN_TOKEN) -> ClientConnection:
        return connect(
            f"ws://127.0.0.1:{self.port}/api/ws",
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=None,
        )


def subscribe(ws: ClientConnection, topic: str, since: str | None = None) -> None:
    message: dict[str, Any] = {"op": "subscribe", "topic": topic}
    if since is not None:
        message["since"] = since
    ws.send(json.dumps(message))


def receive(ws: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=timeout))
    return message
