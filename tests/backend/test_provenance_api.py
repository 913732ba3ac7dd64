"""Provenance through REST: only the node of a job's current attempt records it; users read
it (recorded and reported kept apart) and diff it across jobs."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from backend.db import Database
from backend.jobs.models import Attempt, AttemptSlice, Job
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC


def _running_on_n1(api: TestClient, database: Database, token: str) -> tuple[int, int]:
    job_id = api.post("/api/jobs", json=GOOD_SPEC, headers=bearer(token)).json()["id"]
    with database.session() as session:
        attempt = Attempt(job_id=job_id, number=1, node_name="n1", devices=[0], master_port=1)
        session.add(attempt)
        session.flush()
        session.add(AttemptSlice(attempt_id=attempt.id, node_name="n1", node_rank=0, devices=[0]))
        session.get_one(Job, job_id).attempt = 1
        session.commit()
        return job_id, attempt.id


def _body(commit: str, torch: str, packages: list[str]) -> dict[str, Any]:
    tree = {
        "root": "/srv/scripts",
        "entrypoint": "train.py",
        "sha256": commit * 4,
        "files": 3,
        "bytes": 99,
        "complete": True,
        "git": {"toplevel": "/srv/scripts", "commit": commit, "dirty": True, "diff": "+x"},
    }
    reported = {
        "python": "3.11.2",
        "executable": "/usr/bin/python3",
        "torch": torch,
        "packages": packages,
    }
    return {"recorded": {"script": tree, "node": "n1"}, "reported": reported}


def test_the_node_records_and_users_read_and_diff(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    alice, node = bearer(tokens["alice"]), bearer(tokens["node"])
    first, attempt1 = _running_on_n1(api, database, tokens["alice"])
    second, attempt2 = _running_on_n1(api, database, tokens["alice"])
    assert api.get(f"/api/jobs/{first}/provenance", headers=alice).json()["recorded"] is None
    sent = api.post(
        f"/api/attempts/{attempt1}/provenance",
        json=_body("a" * 16, "2.13.0", ["numpy==2.0", "torch==2.13.0"]),
        headers=node,
    )
    assert sent.status_code == 204, sent.text
    api.post(
        f"/api/attempts/{attempt2}/provenance",
        json=_body("b" * 16, "2.13.0", ["numpy==2.1", "torch==2.13.0", "rich==13"]),
        headers=node,
    )
    view = api.get(f"/api/jobs/{first}/provenance", headers=alice).json()
    assert view["recorded"]["script"]["git"]["commit"] == "a" * 16
    assert view["recorded"]["attempt"] == 1
    assert view["reported"]["packages"] == ["numpy==2.0", "torch==2.13.0"]
    diff = api.get("/api/provenance/diff", params={"ids": [first, second]}, headers=alice).json()
    fields = {row["field"]: row["values"] for row in diff["differences"]}
    assert fields["recorded.script.git.commit"] == ["a" * 16, "b" * 16]
    assert fields["package numpy"] == ["2.0", "2.1"]
    assert fields["package rich"] == [None, "13"]
    assert "reported.torch" not in fields and "package torch" not in fields


def test_nobody_but_the_attempts_node_records(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    _, attempt = _running_on_n1(api, database, tokens["alice"])
    body = _body("c" * 16, "2.13.0", [])
    as_user = api.post(
        f"/api/attempts/{attempt}/provenance", json=body, headers=bearer(tokens["alice"])
    )
    assert as_user.status_code == 403
    elsewhere = api.post("/api/attempts/9999/provenance", json=body, headers=bearer(tokens["node"]))
    assert elsewhere.status_code == 404
    too_long = {**body, "reported": {**body["reported"], "torch": "x" * 65}}
    refused = api.post(
        f"/api/attempts/{attempt}/provenance", json=too_long, headers=bearer(tokens["node"])
    )
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-2:] == [
        "reported",
        "torch",
    ]


def test_the_limits_a_node_met_are_kept_and_shown_and_bounded(
    api: TestClient, tokens: dict[str, str], database: Database
) -> None:
    alice, node = bearer(tokens["alice"]), bearer(tokens["node"])
    job, attempt = _running_on_n1(api, database, tokens["alice"])
    body = _body("c" * 16, "2.13.0", [])
    skipped = "file 'weights.bin' skipped: 3 GiB over the 16 MiB per-file cap"
    body["recorded"]["script"] |= {"complete": False, "limits": [skipped]}
    body["recorded"]["script"]["git"] |= {
        "diff_truncated": True,
        "diff_note": "diff truncated at 64 KiB (the cap)",
    }
    assert (
        api.post(f"/api/attempts/{attempt}/provenance", json=body, headers=node).status_code == 204
    )
    script = api.get(f"/api/jobs/{job}/provenance", headers=alice).json()["recorded"]["script"]
    assert script["limits"] == [skipped]
    assert script["git"]["diff_note"] == "diff truncated at 64 KiB (the cap)"
    body["recorded"]["script"]["limits"] = [skipped] * 22  # more notes than a node ever sends
    refused = api.post(f"/api/attempts/{attempt}/provenance", json=body, headers=node)
    assert refused.status_code == 422
