"""Whether this worker listens on the API's Redis: the deployment marker the API keeps there.

A worker started with another TRAINBOARD_REDIS_URL than the API's heartbeats fine but never
receives a task. It reports which deployments' markers its Redis holds at registration,
and whether it holds the API's at every heartbeat; the API shows it `misconfigured`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import redis

from workers.contract.keys import MARKER_PREFIX, deployment_marker

log = logging.getLogger(__name__)


class BrokerCheck:
    """Reads the deployment markers in this worker's Redis."""

    def __init__(self, redis_url: str) -> None:
        self._client = redis.Redis.from_url(redis_url, socket_timeout=2.0)
        #: the API's deployment id, from the registration reply
        self.deployment: str | None = None
        self._warned = False

    def seen_deployments(self) -> list[str] | None:
        """Deployment ids whose markers this Redis holds (None: Redis did not answer)."""
        try:
            keys = list(self._client.scan_iter(match=f"{MARKER_PREFIX}*", count=1000))
        except redis.RedisError as err:
            log.warning("cannot read deployment markers from this worker's Redis: %s", err)
            return None
        return [k.decode().removeprefix(MARKER_PREFIX) for k in keys][:64]

    def learn(self, registered: Any) -> Any:
        """Take the deployment id from a registration reply; say once if we are not on it."""
        if isinstance(registered, dict) and isinstance(registered.get("deployment"), str):
            self.deployment = registered["deployment"]
            if self.seen() is False and not self._warned:
                self._warned = True
                message = (
                    f"this worker's Redis holds no marker of deployment {self.deployment}: it "
                    "listens on another Redis than the API and will receive no work (check "
                    "TRAINBOARD_REDIS_URL); the node shows as misconfigured"
                )
                log.error(message)
                print(f"trainboard worker: {message}", file=sys.stderr, flush=True)
        return registered

    def seen(self) -> bool | None:
        """Whether this Redis holds the API's marker (None: not known yet, or no answer)."""
        if self.deployment is None:
            return None
        try:
            return bool(self._client.exists(deployment_marker(self.deployment)))
        except redis.RedisError:
            return None

    def close(self) -> None:
        """Close the connection."""
        self._client.close()
