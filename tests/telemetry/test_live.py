"""Live delivery through a real uvicorn server: resume after a reconnect, fan-out per process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection

from backend.nodes.deployment import deployment_id
from tests.telemetry.helpers import LiveServer, add_attempt, receive, subscribe, wait_for
from workers.contract.keys import Keys
from workers.contract.protocol import METRICS_STREAM
from workers.telemetry import StreamPublisher

Key = tuple[str, int, int, float]


class Follower:
    """A websocket client of one job topic that records every metric point it is sent."""

    def __init__(self, server: LiveServer, topic: str) -> None:
        self.server, self.topic = server, topic
        self.points: list[Key] = []
        self.position: str | None = None
        self.ws: ClientConnection | None = None

    def connect(self, since: str | None = None) -> dict[str, Any]:
        """Subscribe (resuming after since when given); the first message about the topic."""
        self.ws = self.server.websocket()
        subscribe(self.ws, self.topic, since)
        return self.read_one()

    def read_one(self, timeout: float = 10.0) -> dict[str, Any]:
        assert self.ws is not None
        message = receive(self.ws, timeout)
        assert message.get("topic") == self.topic, message
        data = message["data"]
        if message["type"] == "snapshot":
            for name, cols in data["metrics"].items():
                self.points += zip(
                    [name] * len(cols["step"]),
                    cols["rank"],
                    cols["step"],
                    cols["value"],
                    strict=True,
                )
        for p in data.get("metrics", []) if message["type"] == "delta" else []:
            self.points.append((p["name"], p["rank"], p["step"], p["value"]))
        self.position = message.get("pos", self.position)
        return message

    def read_until(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(set(self.points)) < count and time.monotonic() < deadline:
            self.read_one(timeout=max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()


@pytest.fixture
def steady_points(live_api: LiveServer, redis_url: str) -> Iterator[tuple[int, list[Key]]]:
    """A job whose rank publishes a loss point every 10 ms for 8 s: (job id, every point)."""
    job, attempt = add_attempt(live_api.db, owner="admin")
    sent: list[Key] = []
    with live_api.db.session() as session:  # the server's deployment names its streams
        stream = Keys(deployment_id(session)).stream(METRICS_STREAM)
    publisher = StreamPublisher(redis_url, stream, "rank-0")
    stop = threading.Event()

    def run() -> None:
        for step in range(800):
            if stop.wait(0.01):
                return
            value = 1.0 / (step + 1)
            publisher.add({"attempt_id": attempt, "rank": 0, "step": step, "name": "loss",
                           "value": value, "time": time.time()})  # fmt: skip
            sent.append(("loss", 0, step, value))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield job, sent
    stop.set()
    thread.join()
    publisher.close()


@pytest.mark.slow
def test_a_client_away_for_5_s_ends_with_exactly_the_series_of_one_that_stayed(
    live_api: LiveServer, steady_points: tuple[int, list[Key]]
) -> None:
    job, sent = steady_points
    stayed, left = Follower(live_api, f"job:{job}"), Follower(live_api, f"job:{job}")
    assert stayed.connect()["type"] == "snapshot"
    assert left.connect()["type"] == "snapshot"
    left.read_until(50)
    left.close()
    seen = len(left.points)
    before = set(left.points)
    time.sleep(5)

    first = left.connect(since=left.position)
    assert first["type"] == "delta" and first["data"]["job"]["id"] == job  # resumed, no snapshot
    wait_for(lambda: len(sent) == 800, timeout=30, what="the publisher to finish")
    stayed.read_until(800)
    left.read_until(800)
    missed = left.points[seen:]
    assert len(set(missed)) == len(missed) and not before & set(missed)  # exactly what it missed
    # what each shows (the client keeps one point per key: snapshot and first deltas may overlap)
    assert set(left.points) == set(stayed.points) == set(sent)
    stayed.close()
    left.close()


def test_an_unknown_position_gets_a_fresh_snapshot(live_api: LiveServer) -> None:
    job, _ = add_attempt(live_api.db, owner="admin")
    follower = Follower(live_api, f"job:{job}")
    for since in ("99999999999999-0", "not-a-position"):
        assert follower.connect(since=since)["type"] == "snapshot"
        follower.close()


def test_a_second_api_process_without_ingest_delivers_live_deltas(
    live_api: LiveServer, steady_points: tuple[int, list[Key]]
) -> None:
    job, _ = steady_points
    other_settings = live_api.settings.model_copy(update={"run_ingest": False})
    with LiveServer.running(other_settings) as other:
        follower = Follower(other, f"job:{job}")
        follower.connect()
        follower.read_until(100)
        assert [step for _, _, step, _ in follower.points[-5:]] == sorted(
            step for _, _, step, _ in follower.points[-5:]
        )
        follower.close()
