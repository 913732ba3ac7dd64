"""What the integration clusters share: jobs and nodes read through the API, rows through SQL."""

from __future__ import annotations

from typing import Any

from tests.stack import rows_of, wait_for


class JobApi:
    """Reads over a cluster's `api` (one call, JSON back) and its `database_url`."""

    #: how long `wait_state` waits unless told (seconds)
    wait_seconds: float = 120

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    @property
    def database_url(self) -> str:
        raise NotImplementedError

    def node(self, name: str) -> dict[str, Any]:
        """The node as GET /api/nodes lists it ({} when it is not listed)."""
        return dict({n["name"]: n for n in self.api("GET", "/api/nodes")["nodes"]}.get(name, {}))

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.api("GET", f"/api/jobs/{job_id}"))

    def wait_state(self, job_id: int, *states: str, timeout: float | None = None) -> dict[str, Any]:
        """The job once it is in one of states."""
        return dict(
            wait_for(
                lambda: (job := self.job(job_id))["state"] in states and job,
                timeout=timeout or self.wait_seconds,
                what=f"job {job_id} to become {' or '.join(states)}",
            )
        )

    def sql(self, query: str, **params: Any) -> list[Any]:
        """The rows of a query on the cluster's database."""
        return rows_of(self.database_url, query, **params)
