"""The hub in isolation: a slow client is told to resync, held deltas are released exactly once."""

from __future__ import annotations

import asyncio
import json

from backend.auth.service import Principal
from backend.telemetry.hub import Client, Hub, encode

ADMIN = Principal(
    user_id=1, username="admin", role="admin", scopes=frozenset({"read"}), token_id=1, kind="api"
)


def drain(client: Client) -> list[dict[str, object]]:
    found = []
    while not client.outbox.empty():
        found.append(json.loads(client.outbox.get_nowait()))
    return found


def test_a_client_that_falls_behind_is_told_to_resync_and_others_are_not_slowed() -> None:
    async def scenario() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        hub = Hub(asyncio.get_running_loop())
        slow, fast = Client(ADMIN, queue_size=3), Client(ADMIN, queue_size=100)
        for client in (slow, fast):
            hub.subscribe(client, "cluster")
            client.go_live("cluster", [], None)
        for i in range(5):
            hub.publish_raw("cluster", f"{i + 1}-0", json.dumps({"samples": [{"i": i}]}))
        await asyncio.sleep(0)
        return drain(slow), drain(fast)

    slow, fast = asyncio.run(scenario())
    assert slow[0] == {"type": "resync", "topics": ["cluster"]}  # its backlog was dropped
    assert [m["pos"] for m in slow[1:]] == ["5-0"]  # and it goes on from there
    assert [m["pos"] for m in fast] == ["1-0", "2-0", "3-0", "4-0", "5-0"]


def test_deltas_held_during_a_snapshot_are_released_after_its_position_only() -> None:
    async def scenario() -> list[dict[str, object]]:
        hub = Hub(asyncio.get_running_loop())
        client = Client(ADMIN)
        hub.subscribe(client, "job:1")
        for i in range(1, 5):
            hub.publish_raw("job:1", f"{i}-0", json.dumps({"metrics": [{"step": i}]}))
        hub.publish("job:1", {"job": {"id": 1, "state": "running"}})
        await asyncio.sleep(0)
        snapshot = encode({"type": "snapshot", "topic": "job:1", "pos": "2-0", "data": {}})
        client.go_live("job:1", [snapshot], "2-0")
        return drain(client)

    messages = asyncio.run(scenario())
    assert [m["type"] for m in messages] == ["snapshot", "delta", "delta", "delta"]
    assert [m.get("pos") for m in messages[1:]] == ["3-0", "4-0", None]  # the job view has none
