"""This deployment's id, and the marker by which a worker knows it listens on our Redis.

The id is made once (migration 0012) and stored in the database. The control plane keeps
a marker key holding it in its Redis; a worker reports which deployments' markers its own
Redis holds, and a node whose Redis lacks ours cannot receive our tasks: it is shown as
`misconfigured` with that reason and gets no work.
"""

from __future__ import annotations

from datetime import datetime

import redis
from sqlalchemy import String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from backend.db import Base, utcnow
from workers.contract.keys import deployment_marker

WRONG_REDIS = (
    "listens on another Redis than the API: its Redis holds no marker of this deployment "
    "(check the worker's TRAINBOARD_REDIS_URL)"
)


class Deployment(Base):
    __tablename__ = "deployment"
    __table_args__ = {"comment": "one row: this deployment's id"}

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


def deployment_id(session: Session) -> str:
    """This deployment's id."""
    return session.scalars(select(Deployment.id)).one()


def mark_broker(client: redis.Redis, deployment: str) -> None:
    """Put (back) our marker into our Redis (a flush may have taken it)."""
    client.set(deployment_marker(deployment), deployment)


def broker_shared(client: redis.Redis, deployment: str, seen: bool) -> bool:
    """Whether a node that did (not) see our marker listens on our Redis.

    A node that did not see it is blamed only if the marker is in our Redis now: if ours
    was flushed, the marker is put back and the node is not at fault.
    """
    if seen:
        return True
    if client.exists(deployment_marker(deployment)):
        return False
    mark_broker(client, deployment)
    return True
