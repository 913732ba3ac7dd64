"""After submit: rename, notes, tags, archive (hidden by default, restorable), bulk actions."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC


def _submit(api: TestClient, token: str, name: str) -> int:
    response = api.post("/api/jobs", json={**GOOD_SPEC, "name": name}, headers=bearer(token))
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def _board(api: TestClient, token: str, **params: Any) -> list[int]:
    response = api.get("/api/jobs", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


def test_rename_notes_and_tags_after_submit_with_an_event(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice = tokens["alice"]
    job = _submit(api, alice, "first")
    change = {"name": "better name", "notes": "# Why\nlr *too* high", "tags": ["lr", "v2"]}
    response = api.patch(f"/api/jobs/{job}", json=change, headers=bearer(alice))
    assert response.status_code == 200, response.text
    view = response.json()
    assert (view["name"], view["notes"], view["tags"]) == (
        "better name",
        change["notes"],
        ["lr", "v2"],
    )
    assert view["spec"]["tags"] == ["lr", "v2"]
    events = api.get(f"/api/jobs/{job}/events", headers=bearer(alice)).json()
    assert events[-1]["kind"] == "edited"
    assert "renamed from 'first'" in events[-1]["message"]
    assert "tags set to lr, v2" in events[-1]["message"]


def test_bad_edits_are_refused_naming_the_field(api: TestClient, tokens: dict[str, str]) -> None:
    alice = tokens["alice"]
    job = _submit(api, alice, "j")
    for body, field in [
        ({"tags": ["no spaces"]}, "tags"),
        ({"tags": ["a", "a"]}, "tags"),
        ({"name": "  "}, "name"),
        ({"notes": "x" * 20_001}, "notes"),
        ({"archived": "yes"}, "archived"),
        ({"owner": "bob"}, "owner"),
    ]:
        response = api.patch(f"/api/jobs/{job}", json=body, headers=bearer(alice))
        assert response.status_code == 422, (body, response.text)
        assert field in {str(part) for e in response.json()["detail"] for part in e["loc"]}


def test_someone_elses_job_cannot_be_edited_and_looks_missing(
    api: TestClient, tokens: dict[str, str]
) -> None:
    job = _submit(api, tokens["admin"], "admins")
    response = api.patch(f"/api/jobs/{job}", json={"name": "x"}, headers=bearer(tokens["alice"]))
    missing = api.patch("/api/jobs/999999", json={"name": "x"}, headers=bearer(tokens["alice"]))
    assert response.status_code == missing.status_code == 404
    assert response.json()["detail"].replace(str(job), "N") == missing.json()["detail"].replace(
        "999999", "N"
    )


def test_archive_hides_from_the_board_until_restored(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice = tokens["alice"]
    kept, archived = _submit(api, alice, "kept"), _submit(api, alice, "old")
    assert api.patch(
        f"/api/jobs/{archived}", json={"archived": True}, headers=bearer(alice)
    ).json()["archived"]
    assert _board(api, alice) == [kept]
    assert _board(api, alice, archived="only") == [archived]
    assert _board(api, alice, archived="all") == [archived, kept]
    api.patch(f"/api/jobs/{archived}", json={"archived": False}, headers=bearer(alice))
    assert _board(api, alice) == [archived, kept]


def test_bulk_cancel_and_archive_answer_per_job(api: TestClient, tokens: dict[str, str]) -> None:
    alice = tokens["alice"]
    jobs = [_submit(api, alice, f"j{i}") for i in range(3)]
    others = _submit(api, tokens["admin"], "admins")
    body = {"ids": [*jobs, others], "action": "cancel"}
    results = api.post("/api/jobs/bulk", json=body, headers=bearer(alice)).json()
    assert [r["ok"] for r in results] == [True, True, True, False]
    assert "not found" in results[-1]["detail"]
    states = {
        j["id"]: j["state"] for j in api.get("/api/jobs", headers=bearer(alice)).json()["jobs"]
    }
    assert all(states[j] == "cancelled" for j in jobs)
    again = api.post("/api/jobs/bulk", json=body, headers=bearer(alice)).json()
    assert not again[0]["ok"] and "cancelled" in again[0]["detail"]  # already cancelled: 409 text
    body = {"ids": jobs[:2], "action": "archive"}
    assert all(r["ok"] for r in api.post("/api/jobs/bulk", json=body, headers=bearer(alice)).json())
    assert _board(api, alice) == [jobs[2]]
    bad = api.post("/api/jobs/bulk", json={"ids": [], "action": "delete"}, headers=bearer(alice))
    assert bad.status_code == 422
    assert {e["loc"][-1] for e in bad.json()["detail"]} == {"ids", "action"}
