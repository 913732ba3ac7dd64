"""A job's logs: search over every stored line, the whole log as a download, the loss rank."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import insert

from backend.db import Database
from backend.jobs.models import Attempt
from backend.telemetry.models import LogLine
from tests.backend.conftest import bearer
from tests.telemetry.helpers import add_attempt


def _lines(attempt_id: int, texts: list[str], *, rank: int = 0, stream: str = "stdout") -> list:
    return [
        {"attempt_id": attempt_id, "rank": rank, "stream": stream, "seq": i, "line": t, "time": i}
        for i, t in enumerate(texts)
    ]


def _job_with_two_attempts(database: Database, owner: str = "alice") -> int:
    """Attempt 1: 2,000 step lines on rank 0, a stderr traceback on rank 1; attempt 2: a line."""
    job_id, first = add_attempt(database, owner=owner, state="running")
    with database.session() as session:
        second = Attempt(job_id=job_id, number=2, node_name="node-a", devices=[0], master_port=1)
        session.add(second)
        session.flush()
        rows = _lines(first, [f"step {s} loss {1 / (s + 1):.4f}" for s in range(2000)])
        rows += _lines(
            first, ["Traceback", "RuntimeError: 100% Lost peer"], rank=1, stream="stderr"
        )
        rows += _lines(second.id, ["resumed from step 1990"])
        session.execute(insert(LogLine), rows)
    return job_id


def test_search_reads_every_stored_line_not_only_the_tail(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    job_id = _job_with_two_attempts(database)
    alice = bearer(tokens["alice"])
    tail = api.get(f"/api/jobs/{job_id}/logs", headers=alice).json()["lines"]
    assert len(tail) == 300 and all("step 7 " not in line["line"] for line in tail)

    def search(**params: Any) -> list[str]:
        got = api.get(f"/api/jobs/{job_id}/logs", params=params, headers=alice)
        assert got.status_code == 200, got.text
        return [line["line"] for line in got.json()["lines"]]

    assert search(q="STEP 7 ") == ["step 7 loss 0.1250"]  # any case, the oldest lines too
    assert search(q="lost PEER") == ["RuntimeError: 100% Lost peer"]
    assert search(q="100%") == ["RuntimeError: 100% Lost peer"]  # % is text, not a wildcard
    assert search(q="0%") == ["RuntimeError: 100% Lost peer"]
    assert search(q="_") == []  # _ is text too
    assert search(rank=1) == ["Traceback", "RuntimeError: 100% Lost peer"]
    newest = ["step 1998 loss 0.0005", "step 1999 loss 0.0005", "resumed from step 1990"]
    assert search(q="step 19", limit=3) == newest  # the newest matches, oldest first
    too_long = api.get(f"/api/jobs/{job_id}/logs", params={"q": "x" * 201}, headers=alice)
    assert too_long.status_code == 422


def test_the_whole_log_downloads_as_text_per_job_or_attempt(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    job_id = _job_with_two_attempts(database)
    alice = bearer(tokens["alice"])
    whole = api.get(f"/api/jobs/{job_id}/logs.txt", headers=alice)
    assert whole.status_code == 200
    assert whole.headers["content-type"].startswith("text/plain")
    assert whole.headers["content-disposition"] == f'attachment; filename="job-{job_id}.log"'
    lines = whole.text.splitlines()
    assert len(lines) == 2003
    assert lines[0] == "[attempt 1 rank 0] step 0 loss 1.0000"
    assert "[attempt 1 rank 1 stderr] RuntimeError: 100% Lost peer" in lines
    assert lines[-1] == "[attempt 2 rank 0] resumed from step 1990"
    second = api.get(f"/api/jobs/{job_id}/logs.txt", params={"attempt": 2}, headers=alice)
    assert second.text == "[attempt 2 rank 0] resumed from step 1990\n"
    assert second.headers["content-disposition"].endswith(f'filename="job-{job_id}-attempt-2.log"')


def test_another_users_log_is_not_found_and_a_signed_out_one_refused(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    job_id = _job_with_two_attempts(database, owner="admin")
    alice = bearer(tokens["alice"])
    for path in ("/logs", "/logs.txt"):
        assert api.get(f"/api/jobs/{job_id}{path}", headers=alice).status_code == 404
        assert api.get(f"/api/jobs/{job_id}{path}").status_code == 401
    admin = bearer(tokens["admin"])
    assert api.get(f"/api/jobs/{job_id}/logs.txt", headers=admin).status_code == 200


def test_the_loss_rank_is_the_first_rank_of_a_pipelines_last_stage(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice = bearer(tokens["alice"])
    base = {"template": "mlp", "hyperparameters": {"steps": 10}}
    shapes = {
        "data": ({"strategy": "data", "devices": 2}, 0),
        "model": ({"strategy": "model", "devices": 2, "microbatches": 8}, 1),
        "hybrid": (
            {"strategy": "hybrid", "devices": 4, "pipeline_stages": 2, "microbatches": 8},
            1,
        ),
    }
    for name, (parallelism, rank) in shapes.items():
        created = api.post(
            "/api/jobs", json={**base, "name": name, "parallelism": parallelism}, headers=alice
        )
        assert created.status_code == 201, created.text
        assert created.json()["loss_rank"] == rank, name
