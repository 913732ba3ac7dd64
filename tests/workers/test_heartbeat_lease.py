"""A node's lease runs from when its heartbeat was sent, not from when the answer is read.

The fencing flake this pins down: a node agent frozen (SIGSTOP) while a heartbeat was in
flight read the control plane's old "all is well" answer on waking, renewed its lease from
that moment and let its supervisor prune checkpoints that the control plane had already
recorded as the lost attempt's last one (and resumed its successor from). A real HTTP
server stands in for the control plane and answers late, as a frozen reader would see it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workers.node.api_client import NodeApiClient
from workers.node.heartbeat import Fence, Heartbeat

LEASE = 2.0
INTERVAL = 0.5  # the node fences itself max(LEASE / 2, LEASE - 2 * INTERVAL) = 1 s after


class LateControlPlane(BaseHTTPRequestHandler):
    """Answers every heartbeat "keep going" after `delay` seconds."""

    delay = 0.0
    url = ""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay)
        body = json.dumps({"drained": False, "stop": [], "lease_seconds": LEASE}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def control_plane() -> Iterator[type[LateControlPlane]]:
    class handler(LateControlPlane):  # noqa: N801 (a fresh class: its delay is this test's)
        pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def heartbeat(control_plane: type[LateControlPlane]) -> Heartbeat:
    api = NodeApiClient(control_plane.url, "token", instance="0" * 32)
    fence = Fence(running=lambda: [7], kill=lambda *_: None, kill_all=lambda _: None)
    return Heartbeat(api, "n1", INTERVAL, reregister=lambda: None, fence=fence)


def test_a_prompt_answer_renews_the_lease(control_plane: type[LateControlPlane]) -> None:
    beat = heartbeat(control_plane)
    beat.beat()
    assert beat.lease == LEASE
    assert beat.lease_valid()


def test_an_answer_read_after_the_lease_ran_out_renews_nothing(
    control_plane: type[LateControlPlane],
) -> None:
    beat = heartbeat(control_plane)
    beat.beat()
    control_plane.delay = 1.5  # longer than the 1 s after which the node must count itself lost
    beat.beat()
    assert not beat.lease_valid(), "a stale answer must not let the supervisor prune"
