"""A pass's attempt orders reach each node's queue, all of them, in one publish."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.auth.service import bootstrap_node_token
from backend.db import Database
from backend.scheduler.loop import Scheduler
from tests.backend.conftest import bearer
from tests.backend.test_jobs_api import GOOD_SPEC, queued_orders
from workers.contract.protocol import NodeDevice, NodeRegistration


def test_every_order_of_a_pass_reaches_its_nodes_queue(
    api: TestClient,
    tokens: dict[str, str],
    database: Database,
    node_n1: str,
    scheduler: Scheduler,
) -> None:
    n2 = NodeRegistration(
        name="n2",
        hostname="h2",
        address="127.0.0.2",
        devices=[NodeDevice(index=i, kind="cpu", name=f"CPU slot {i}") for i in range(2)],
        data_dir="/",
    )
    with database.session() as session:
        node = bearer(bootstrap_node_token(session, node="n2"))
    assert api.post("/api/nodes/register", json=n2.model_dump(), headers=node).is_success
    alice = bearer(tokens["alice"])
    jobs = [api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()["id"] for _ in range(4)]

    placed = scheduler.tick()  # 2 devices each: two on n1, one on n2, one waits

    assert len(placed) == 3
    client = api.app.state.redis  # type: ignore[attr-defined]
    orders = {name: queued_orders(client, name) for name in ("n1", "n2")}
    assert [len(orders["n1"]), len(orders["n2"])] == [2, 1]
    sent = {(o["job_id"], o["node"], o["attempt_id"]) for o in orders["n1"] + orders["n2"]}
    assert sent == {(p.job_id, p.slices[0][0], _attempt(api, alice, p.job_id)) for p in placed}
    assert {o["job_id"] for o in orders["n2"]} < set(jobs)
    assert all(o["spec"]["name"] == GOOD_SPEC["name"] for o in orders["n1"] + orders["n2"])
    for p in placed:  # each job's timeline and its attempt's placement say where it went
        (name, devices), attempt = p.slices[0], _attempt(api, alice, p.job_id)
        events = api.get(f"/api/jobs/{p.job_id}/events", headers=alice).json()
        scheduled = [e for e in events if e["kind"] == "scheduled"]
        assert [(e["attempt_id"], e["message"]) for e in scheduled] == [
            (attempt, f"attempt 1 scheduled on {name} devices {list(devices)}")
        ]
        view = api.get(f"/api/jobs/{p.job_id}/attempts", headers=alice).json()[-1]
        assert [(s["node"], s["devices"]) for s in view["placement"]] == [(name, list(devices))]


def _attempt(api: TestClient, headers: dict[str, str], job_id: int) -> int:
    attempts = api.get(f"/api/jobs/{job_id}/attempts", headers=headers).json()
    return int(attempts[-1]["id"])


def test_waiting_jobs_are_renumbered_each_pass_and_say_why_they_wait(
    api: TestClient, tokens: dict[str, str], scheduler: Scheduler
) -> None:
    alice = bearer(tokens["alice"])
    jobs = [api.post("/api/jobs", json=GOOD_SPEC, headers=alice).json()["id"] for _ in range(3)]

    def seen(job_id: int) -> tuple[int | None, str | None, str]:
        view = api.get(f"/api/jobs/{job_id}", headers=alice).json()
        return view["queue_position"], view["wait_reason"], view["updated_at"]

    scheduler.tick()  # no node: all wait, in submission order
    first = [seen(j) for j in jobs]
    assert [place for place, _, _ in first] == [1, 2, 3]
    assert all(reason and "node" in reason for _, reason, _ in first)

    assert api.post(f"/api/jobs/{jobs[0]}/cancel", headers=alice).is_success
    scheduler.tick()
    again = [seen(j) for j in jobs[1:]]
    assert [place for place, _, _ in again] == [1, 2]
    assert [reason for _, reason, _ in again] == [reason for _, reason, _ in first[1:]]
    assert all(new > old for (_, _, new), (_, _, old) in zip(again, first[1:], strict=True))
