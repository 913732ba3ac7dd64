"""HTTP client for the four node endpoints of the backend, authenticated by the node token."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from workers.contract.protocol import (
    AttemptOutcome,
    Heartbeat,
    HeartbeatReply,
    NodeRegistration,
)
from workers.contract.provenance import ProvenanceIn

log = logging.getLogger(__name__)


class ApiError(RuntimeError):
    """The backend answered with an unexpected status."""


@dataclass(frozen=True)
class Claim:
    """A claim's answer: won or not, and the attempt's rendezvous port once chosen."""

    won: bool
    master_port: int | None = None


class NodeApiClient:
    """Calls register, heartbeat, claim and finish; retries where an answer must not be lost."""

    def __init__(
        self, api_url: str, token: str, *, instance: str | None = None, timeout: float = 10.0
    ) -> None:
        #: this worker process's id, sent with claims and reports (the fencing token's half)
        self.instance = instance
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=api_url.rstrip("/"), headers=headers, timeout=timeout)

    def close(self) -> None:
        """Close the underlying connection pool."""
        self._http.close()

    def register(self, registration: NodeRegistration, *, retry_for: float | None = None) -> Any:
        """Register this node and its devices; retry until the API answers (or retry_for ends)."""
        body = registration.model_dump(mode="json")
        return self._post("/api/nodes/register", body, retry_for=retry_for).json()

    def heartbeat(self, node: str, beat: Heartbeat, *, retry_for: float = 5.0) -> HeartbeatReply:
        """Send one heartbeat (attempts run, machine load); what the node must do now."""
        body = beat.model_dump(mode="json")
        answer = self._post(f"/api/nodes/{node}/heartbeat", body, retry_for=retry_for)
        return HeartbeatReply.model_validate(answer.json())

    def claim(self, attempt_id: int, node: str, *, master_port: int | None = None) -> Claim:
        """Claim an attempt (the node hosting rank 0 names its port); lost on a 409."""
        body = {"node": node, "instance": self.instance, "master_port": master_port}
        response = self._post(
            f"/api/attempts/{attempt_id}/claim", body, retry_for=30.0, accept=(409,)
        )
        answer = response.json() if response.status_code != 409 else {}
        return Claim(bool(answer.get("claimed", False)), answer.get("master_port"))

    def rendezvous(self, attempt_id: int) -> tuple[int | None, bool]:
        """The attempt's rendezvous port (None: not chosen yet) and whether it is still live."""
        answer = self._send("GET", f"/api/attempts/{attempt_id}/rendezvous", None, retry_for=30.0)
        body = answer.json()
        return body.get("master_port"), bool(body.get("live"))

    def provenance(self, attempt_id: int, body: ProvenanceIn) -> None:
        """Record what an attempt runs (sent once by the node of rank 0; not retried long)."""
        self._post(f"/api/attempts/{attempt_id}/provenance", body.as_json(), retry_for=10.0)

    def finish(self, attempt_id: int, outcome: AttemptOutcome, *, retry_for: float = 60.0) -> Any:
        """Report how an attempt ended; retried for up to retry_for seconds so it is not lost."""
        body = outcome.model_copy(update={"instance": self.instance}).model_dump(mode="json")
        return self._post(f"/api/attempts/{attempt_id}/finish", body, retry_for=retry_for).json()

    def _post(
        self,
        path: str,
        body: dict[str, Any],
        *,
        retry_for: float | None,
        accept: tuple[int, ...] = (),
    ) -> httpx.Response:
        return self._send("POST", path, body, retry_for=retry_for, accept=accept)

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        retry_for: float | None,
        accept: tuple[int, ...] = (),
    ) -> httpx.Response:
        """A call with exponential backoff on connection errors and 5xx, up to retry_for s."""
        deadline = None if retry_for is None else time.monotonic() + retry_for
        delay = 0.2
        while True:
            try:
                response = self._http.request(method, path, json=body)
                if response.status_code < 500:
                    if response.is_success or response.status_code in accept:
                        return response
                    raise ApiError(f"{method} {path}: {response.status_code} {response.text[:300]}")
                problem = f"{response.status_code} {response.text[:200]}"
            except httpx.TransportError as err:
                problem = f"{type(err).__name__}: {err}"
            if deadline is not None and time.monotonic() + delay > deadline:
                raise ApiError(f"{method} {path} failed: {problem}")
            log.warning("%s %s failed (%s); retrying in %.1fs", method, path, problem, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
