"""What a data-parallel job's update mode costs, per rank (#35), aggregated on the server.

Each rank's step time and the bytes it sent and received per step are the means of its
last `window` steps (the engine measures them: `step_time`, `bytes_sent`, `bytes_received`,
docs/engine.md); the server's queue and the updates' staleness are rank 0's over the whole
run (`server_queue`, `staleness_mean`, `staleness_max`, `updates_applied`: async only).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from backend.telemetry.series.cache import SeriesCache
from backend.telemetry.series.curves import Curve, merge_attempts, per_step
from backend.telemetry.series.queries import attempts_of

#: steps per rank the step time and bytes are averaged over (the newest ones)
WINDOW = 50
PER_RANK = ("step_time", "bytes_sent", "bytes_received")
#: rank 0's, async only
SERVER = ("server_queue", "staleness_mean", "staleness_max", "updates_applied")


class RankCosts(BaseModel):
    rank: int
    step_time: float | None = Field(description="seconds per step, mean of the last steps")
    bytes_sent: float | None = Field(description="bytes per step, mean of the last steps")
    bytes_received: float | None = Field(description="bytes per step, mean of the last steps")


class ServerCosts(BaseModel):
    """Rank 0 as the asynchronous parameter server, over the whole run."""

    queue_mean: float | None = Field(description="gradients waiting when rank 0 looked")
    queue_max: float | None
    staleness_mean: float | None = Field(
        description="updates between a gradient's weights and its application"
    )
    staleness_max: float | None
    updates_applied: float | None = Field(description="worker gradients applied in all")


class UpdateCosts(BaseModel):
    job_id: int
    window: int = Field(description="the newest steps per rank the means are over")
    ranks: list[RankCosts]
    server: ServerCosts | None = Field(description="null: the job recorded no server metrics")


def update_costs(
    session: Session, cache: SeriesCache, *, job_id: int, window: int = WINDOW
) -> UpdateCosts:
    """The job's per-rank step time and bytes per step, and rank 0's server metrics."""
    attempts = [a.id for a in attempts_of(session, job_id)]

    def by_rank(name: str) -> dict[int, Curve]:
        raws = [cache.raw(session, attempt_id=a, name=name) for a in attempts]
        ranks = sorted({int(r) for raw in raws for r in np.unique(raw.rank)})
        return {r: merge_attempts([per_step(raw, r) for raw in raws]) for r in ranks}

    curves = {name: by_rank(name) for name in PER_RANK}
    ranks = sorted({r for per in curves.values() for r in per})

    def recent(name: str, rank: int) -> float | None:
        curve = curves[name].get(rank)
        return (
            None if curve is None or not len(curve.value) else float(curve.value[-window:].mean())
        )

    server = {name: by_rank(name).get(0) for name in SERVER}
    return UpdateCosts(
        job_id=job_id,
        window=window,
        ranks=[RankCosts(rank=r, **{n: recent(n, r) for n in PER_RANK}) for r in ranks],
        server=_server(server)
        if any(c is not None and len(c.value) for c in server.values())
        else None,
    )


def _server(curves: dict[str, Curve | None]) -> ServerCosts:
    def of(name: str) -> np.ndarray:
        curve = curves[name]
        return curve.value if curve is not None else np.empty(0)

    def mean(values: np.ndarray) -> float | None:
        return float(values.mean()) if len(values) else None

    def top(values: np.ndarray) -> float | None:
        return float(values.max()) if len(values) else None

    queue, applied, staleness = of("server_queue"), of("updates_applied"), of("staleness_mean")
    # a step's mean staleness weighs as many updates as it applied (same rows, same steps)
    weighted = len(staleness) == len(applied) and applied.sum() > 0
    return ServerCosts(
        queue_mean=mean(queue),
        queue_max=top(queue),
        staleness_mean=float((staleness * applied).sum() / applied.sum())
        if weighted
        else mean(staleness),
        staleness_max=top(of("staleness_max")),
        updates_applied=float(applied.sum()) if len(applied) else None,
    )
