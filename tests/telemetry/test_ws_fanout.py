"""Fan-out through a real uvicorn server: shared frames, compression, a client that never reads."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from secrets import token_hex
from types import SimpleNamespace

import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import PerMessageDeflate
from websockets.sync.client import ClientConnection, connect

from backend.telemetry.live import feed, hub
from backend.telemetry.live.direct import DirectOutlet
from tests.telemetry.helpers import ADMIN, LiveServer, receive, subscribe


def publish_cluster_deltas(
    redis_url: str, server: LiveServer, count: int, *, pad: int = 0
) -> list[str]:
    """Append count `cluster` deltas (pad random bytes each) to the live stream; their positions."""
    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline(transaction=False)
    deltas = [
        ("cluster", {"samples": [{"device": i}], "pad": token_hex(pad // 2)}) for i in range(count)
    ]
    feed.append(pipe, deltas, stream=server.keys().name(feed.LIVE_STREAM))
    positions = [p.decode() for p in pipe.execute()]
    client.close()
    return positions


def cluster_deltas(ws: ClientConnection, count: int) -> list[dict[str, object]]:
    messages = [receive(ws) for _ in range(count)]
    assert all(m["type"] == "delta" and m["topic"] == "cluster" for m in messages), messages
    return messages


@pytest.fixture
def cluster_watchers(live_api: LiveServer) -> Iterator[tuple[ClientConnection, ClientConnection]]:
    """Two clients on `cluster` past their snapshots: (asked for permessage-deflate, did not)."""
    url = f"ws://127.0.0.1:{live_api.port}/api/ws"
    deflated = connect(url, additional_headers=ADMIN, max_size=None)  # the default: deflate
    plain = connect(url, additional_headers=ADMIN, max_size=None, compression=None)
    for ws in (deflated, plain):
        subscribe(ws, "cluster")
        assert receive(ws)["type"] == "snapshot"
    yield deflated, plain
    deflated.close()
    plain.close()


def test_compressed_and_plain_clients_get_the_same_deltas_in_order(
    cluster_watchers: tuple[ClientConnection, ClientConnection],
    live_api: LiveServer,
    redis_url: str,
) -> None:
    deflated, plain = cluster_watchers
    assert deflated.response is not None
    offer = deflated.response.headers["Sec-WebSocket-Extensions"]
    # one compressed frame per message serves every client: no per-client zlib context
    assert "permessage-deflate" in offer and "server_no_context_takeover" in offer
    assert plain.response is not None and "Sec-WebSocket-Extensions" not in plain.response.headers

    positions = publish_cluster_deltas(redis_url, live_api, 50, pad=2000)
    got_deflated, got_plain = cluster_deltas(deflated, 50), cluster_deltas(plain, 50)
    assert got_deflated == got_plain
    assert [m["pos"] for m in got_plain] == positions


@pytest.mark.slow
def test_a_client_that_never_reads_does_not_hold_up_others_and_is_told_to_resync(
    live_api: LiveServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub, "CLIENT_QUEUE", 20)  # a short backlog, so it overflows soon
    url = f"ws://127.0.0.1:{live_api.port}/api/ws"
    small = socket.socket()
    small.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    small.connect(("127.0.0.1", live_api.port))
    # websockets stops reading the socket once max_queue messages wait unread
    stalled = connect(url, sock=small, additional_headers=ADMIN, max_size=None, max_queue=2)
    reader = live_api.websocket()
    for ws in (stalled, reader):
        subscribe(ws, "cluster")
    assert receive(reader)["type"] == "snapshot"

    positions = publish_cluster_deltas(redis_url, live_api, 400, pad=20_000)  # 8 MB unread
    assert [m["pos"] for m in cluster_deltas(reader, 400)] == positions

    seen: list[dict[str, object]] = []
    while not any(m["type"] == "resync" for m in seen):
        try:
            seen.append(json.loads(stalled.recv(timeout=10)))
        except (TimeoutError, ConnectionClosed):
            break
    kinds = [m["type"] for m in seen]
    assert kinds[0] == "snapshot" and kinds[-1] == "resync", kinds
    assert seen[-1]["topics"] == ["cluster"]
    before_resync = [m["pos"] for m in seen[1:-1]]
    assert before_resync == positions[: len(before_resync)]  # no gap before it is told
    assert len(before_resync) < len(positions)
    stalled.close()
    reader.close()


def test_frames_are_shared_only_between_connections_that_compress_each_message_alike() -> None:
    def outlet_for(*extensions: PerMessageDeflate) -> DirectOutlet | None:
        conn = SimpleNamespace(extensions=list(extensions))
        protocol = SimpleNamespace(conn=conn, transport=None, writable=None)
        return DirectOutlet.of(protocol)  # type: ignore[arg-type]

    per_message = PerMessageDeflate(False, True, 15, 12)  # no server context takeover
    takeover = PerMessageDeflate(False, False, 15, 12)  # each message depends on the last
    assert outlet_for() is not None
    assert outlet_for(per_message) is not None
    assert outlet_for(takeover) is None  # such a client is sent to through ASGI
