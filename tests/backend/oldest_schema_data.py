"""A populated installation as the oldest migration (0001) left it: several real rows per table."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)

SPEC = {
    "name": "mlp-baseline",
    "template": "mlp",
    "parallelism": {"devices": 2, "strategy": "ddp"},
    "hyperparameters": {"steps": 200, "lr": 0.003, "hidden": 256},
    "checkpoint": {"every_steps": 50},
    "note": "größer — ✓",
}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def unix(seconds: float) -> float:
    """A unix time with sub-microsecond digits, as the workers stamp points."""
    return T0.timestamp() + seconds + 1 / 3


def loss(step: int, rank: int) -> float:
    """Floats with full 53-bit mantissas (and one subnormal): compared bit for bit."""
    if step == 3 and rank == 1:
        return 5e-324
    return 2.302585092994046 * math.exp(-step / 7) + rank * 1e-9 + 0.1 + 0.2


def table(columns: str, *rows: tuple[object, ...]) -> list[dict[str, Any]]:
    """Rows as dicts, from one line of column names and a tuple per row."""
    return [dict(zip(columns.split(), row, strict=True)) for row in rows]


USERS = table(
    "id username password_hash role created_at",
    (1, "admin", None, "admin", at(0)),
    (2, "alice", "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo", "user", at(60)),
    (3, "bob.o'neil", None, "user", at(61)),
)
API_TOKENS = table(
    "id user_id token_hash prefix kind name scopes created_at expires_at revoked_at",
    (1, 1, "a" * 64, "tb_adm1", "api", "bootstrap", "admin", at(1), None, None),
    (2, 2, "b" * 64, "tb_ali2", "api", "laptop", "jobs", at(120), at(7776000), None),
    (3, 2, "c" * 64, "tb_ali3", "session", "browser", "jobs", at(130), at(3600), at(1800)),
    (4, 1, "d" * 64, "tb_nod4", "api", "gpu-0", "node", at(5), None, None),
)
NODES = table(
    "id name hostname address state drained registered_at last_heartbeat",
    (1, "gpu-0", "gpu-0.lab", "10.0.0.10", "up", False, at(10), at(3000)),
    (2, "gpu-1", "gpu-1.lab", "10.0.0.11", "lost", True, at(11), at(900)),
    (3, "cpu-0", "cpu-0.lab", "10.0.0.20", "up", False, at(12), at(2999.5)),
)
H100 = ("cuda", "NVIDIA H100 80GB HBM3")
DEVICES = table(
    "id node_id index kind name uuid memory_total",
    (1, 1, 0, *H100, "GPU-8c1f0d7e-3a52-4b8e-9c61-2f3e4d5a6b7c", 85520809984),
    (2, 1, 1, *H100, "GPU-1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f", 85520809984),
    (3, 3, 0, "cpu", "cpu", None, None),
)
CLONE = {**SPEC, "name": "mlp-baseline (clone)"}
SMALL = {"name": "queued one", "template": "mlp", "parallelism": {"devices": 1}}
JOBS = table(
    "id name owner_id parent_id state spec priority_rank devices_requested attempt restarts"
    " stop_request reason step total_steps created_at started_at finished_at",
    (1, "mlp-baseline", 2, None, "succeeded", SPEC, 1, 2, 2, 1)
    + (None, None, 200, 200, at(200), at(205), at(2400)),
    (2, "mlp-baseline (clone)", 2, 1, "paused", CLONE, 0, 2, 1, 0)
    + (None, "paused by alice", 50, 200, at(2500), at(2501), None),
    (3, "queued one", 3, None, "queued", SMALL, 2, 1, 0, 0)
    + ("pause", None, 0, None, at(2600), None, None),
)
CHECKPOINTS = "/data/runs/{}/checkpoints/attempt-{}/step-{}"
ATTEMPTS = table(
    "id job_id number node_name devices state master_port resume_from last_checkpoint"
    " exit_reason created_at claimed_at finished_at",
    (1, 1, 1, "gpu-1", [0, 1], "failed", 29500, None, CHECKPOINTS.format(1, 1, 50))
    + ("node gpu-1 lost (no heartbeat for 30 s)", at(205), at(206), at(950)),
    (2, 1, 2, "gpu-0", [0, 1], "succeeded", 29517, CHECKPOINTS.format(1, 1, 50))
    + (CHECKPOINTS.format(1, 2, 200), None, at(951), at(952), at(2400)),
    (3, 2, 1, "gpu-0", [0, 1], "stopped", 29533, None, CHECKPOINTS.format(2, 1, 50))
    + ("paused", at(2501), at(2502), at(2590)),
)
JOB_EVENTS = table(
    "id job_id attempt_id kind message step time",
    (1, 1, None, "submitted", "submitted by alice", None, at(200)),
    (2, 1, 1, "started", "attempt 1 on gpu-1", 0, at(206)),
    (3, 1, 1, "checkpoint", "checkpoint at step 50", 50, at(500)),
    (4, 1, 1, "failed", "node gpu-1 lost\nno heartbeat for 30 s", 61, at(950)),
    (5, 1, 2, "succeeded", "finished at step 200/200", 200, at(2400)),
    (6, 2, 3, "paused", "paused by alice", 50, at(2590)),
)

LOG_LINES = [
    {
        "id": 10 * attempt + rank * 5 + seq,
        "attempt_id": attempt,
        "rank": rank,
        "stream": "stderr" if seq == 2 else "stdout",
        "seq": seq,
        "line": f"step {seq * 10}: train loss {loss(seq * 10, rank)!r} \t✓ \x1b[32mok\x1b[0m",
        "time": unix(attempt * 100 + seq),
    }
    for attempt in (1, 2)
    for rank in (0, 1)
    for seq in range(3)
]

METRIC_POINTS = [
    {
        "id": 1000 * attempt + 100 * rank + step + (50 if name == "lr" else 0),
        "attempt_id": attempt,
        "rank": rank,
        "step": step,
        "name": name,
        "value": loss(step, rank) if name == "loss" else 0.003 * 0.5 ** (step // 2),
        "time": unix(step * 0.25),
    }
    for attempt in (1, 2, 3)
    for rank in (0, 1)
    for step in range(1, 6)
    for name in ("loss", "lr")
]

DEVICE_SAMPLES = [
    {
        "id": i + 1,
        "node": "gpu-0",
        "device": i % 2,
        "kind": "cuda",
        "time": unix(i),
        "util": 97.5 - i * 0.1,
        "mem_used": 61203283968 + i,
        "mem_total": 85520809984,
        "temperature": 71.0 + i / 7,
        "power": 612.3456789,
        "attempt_id": 2,
        "rank": i % 2,
    }
    for i in range(4)
] + [
    {
        "id": 5,
        "node": "cpu-0",
        "device": 0,
        "kind": "cpu",
        "time": unix(10),
        "util": 12.5,
        "mem_used": None,
        "mem_total": None,
        "temperature": None,
        "power": None,
        "attempt_id": None,
        "rank": None,
    }
]

#: every table of migration 0001 and its rows, parents before children
ROWS: dict[str, list[dict[str, Any]]] = {
    "users": USERS,
    "api_tokens": API_TOKENS,
    "nodes": NODES,
    "devices": DEVICES,
    "jobs": JOBS,
    "attempts": ATTEMPTS,
    "job_events": JOB_EVENTS,
    "log_lines": LOG_LINES,
    "metric_points": METRIC_POINTS,
    "device_samples": DEVICE_SAMPLES,
}
