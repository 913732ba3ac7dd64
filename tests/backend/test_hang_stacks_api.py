"""Stacks at a hang: the job's owner (and admins) read them; others get a missing job's 404."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.db import Database
from backend.jobs.models import JobEvent
from tests.backend.conftest import bearer, job_row
from tests.telemetry.helpers import user_token

STACK = (
    'Thread 0x00007f0a (most recent call first):\n  File "/scripts/hang.py", line 21 in <module>\n'
)


def _hung_job(database: Database) -> int:
    """Alice's job with a hung event and each rank's stack, as the supervisor sends them."""
    job_id = job_row(database, name="hangs", devices=2)
    with database.session() as session:
        session.add(JobEvent(job_id=job_id, kind="hung", message="hung: no progress", step=30))
        for rank in (1, 0):
            message = f"rank {rank}\n{STACK}"
            session.add(JobEvent(job_id=job_id, kind="hang_stack", message=message, step=30))
    return job_id


def _bob(database: Database) -> str:
    return user_token(database, "bob", scopes="read,submit")


def test_the_owner_reads_each_ranks_stack_and_the_timeline_stays_short(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    job_id = _hung_job(database)
    for who in ("alice", "admin"):
        answer = api.get(f"/api/jobs/{job_id}/hang-stacks", headers=bearer(tokens[who]))
        assert answer.status_code == 200, answer.text
        stacks = answer.json()
        assert [(s["rank"], s["step"], s["stack"]) for s in stacks] == [
            (0, 30, STACK),
            (1, 30, STACK),
        ]
    events = api.get(f"/api/jobs/{job_id}/events", headers=bearer(tokens["alice"])).json()
    assert [e["kind"] for e in events] == ["hung"]  # the stacks are not timeline entries


def test_another_user_gets_the_404_of_a_missing_job(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    job_id = _hung_job(database)
    bob = bearer(_bob(database))
    theirs = api.get(f"/api/jobs/{job_id}/hang-stacks", headers=bob)
    missing = api.get(f"/api/jobs/{job_id + 1000}/hang-stacks", headers=bob)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"] == missing.json()["detail"].replace(
        str(job_id + 1000), str(job_id)
    )
    assert api.get(f"/api/jobs/{job_id}/hang-stacks").status_code == 401  # no credentials
