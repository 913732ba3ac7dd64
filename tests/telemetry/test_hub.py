"""The hub in isolation: a slow client is told to resync, held deltas are released exactly once."""

from __future__ import annotations

import asyncio
import json

from backend.auth.service import Principal
from backend.telemetry.live.hub import Client, Hub, Message, encode

ADMIN = Principal(
    user_id=1, username="admin", role="admin", scopes=frozenset({"read"}), token_id=1, kind="api"
)


def drain(client: Client) -> list[dict[str, object]]:
    found = [json.loads(message.text) for message in client.backlog]
    client.backlog.clear()
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


class FakeOutlet:
    """A connection whose transport pushes back while paused; records what was written."""

    def __init__(self) -> None:
        self.written: list[dict[str, object]] = []
        self.paused = False
        self.open = True
        self.resumed = asyncio.Event()

    @property
    def ready(self) -> bool:
        return self.open and not self.paused

    def write(self, message: Message) -> None:
        assert self.ready, "written to while pushing back"
        self.written.append(json.loads(message.text))

    async def writable(self) -> None:
        await self.resumed.wait()

    def resume(self) -> None:
        self.paused = False
        self.resumed.set()


def test_a_client_that_keeps_up_is_written_in_order_and_a_backlog_is_never_overtaken() -> None:
    async def scenario() -> tuple[list[object], int]:
        hub = Hub(asyncio.get_running_loop())
        outlet = FakeOutlet()
        client = Client(ADMIN, outlet=outlet)
        pump = asyncio.create_task(client.pump(send_text=lambda text: asyncio.sleep(0)))
        hub.subscribe(client, "cluster")
        client.go_live("cluster", ['{"type":"snapshot","pos":"0-0"}'], "0-0")
        hub._fanout_raw("cluster", "1-0", "{}")  # written at once: no task switch
        written_at_once = len(outlet.written)
        outlet.paused = True
        for i in (2, 3):
            hub._fanout_raw("cluster", f"{i}-0", "{}")  # held back in the backlog
        outlet.resume()
        hub._fanout_raw("cluster", "4-0", "{}")  # writable again, but behind the backlog
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        hub._fanout_raw("cluster", "5-0", "{}")  # backlog sent: direct again
        pump.cancel()
        return [m["pos"] for m in outlet.written], written_at_once

    positions, written_at_once = asyncio.run(scenario())
    assert written_at_once == 2  # the snapshot and the first delta
    assert positions == ["0-0", "1-0", "2-0", "3-0", "4-0", "5-0"]


def test_a_closed_connection_is_not_queued_for() -> None:
    async def scenario() -> int:
        outlet = FakeOutlet()
        client = Client(ADMIN, outlet=outlet)
        outlet.open = False
        client.send(encode({"type": "delta"}))
        return len(client.backlog)

    assert asyncio.run(scenario()) == 0
