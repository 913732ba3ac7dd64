"""The API's server (backend/api_server.py): uvicorn without its 0.1-s tick still keeps the
Date header current and stops at once on SIGTERM or SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest

from tests.stack import free_port, wait_for

#: QuietServer serving an app that answers every request with 204
SERVE = """
import sys, uvicorn
from backend.api_server import QuietServer

async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

QuietServer(uvicorn.Config(app, port=int(sys.argv[1]), lifespan="off")).run()
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """The server in a process of its own (it takes its signals in its main thread): the
    process, its URL and its log."""
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), timeout=30, what="the server to answer")
        yield process, url, log
    finally:
        process.kill()
        process.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 204
    except httpx.HTTPError:
        return False


def _date(url: str) -> float:
    return parsedate_to_datetime(httpx.get(url, timeout=5).headers["date"]).timestamp()


def test_the_date_header_moves_on_between_requests(
    served: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    _, url, _ = served
    first = _date(url)
    wait_for(lambda: _date(url) > first, timeout=30, what="a later Date header")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_server(
    served: tuple[subprocess.Popen[bytes], str, Path], sig: signal.Signals
) -> None:
    process, _, log = served
    process.send_signal(sig)
    # after its shutdown, uvicorn raises the signal it caught again, to end by it
    assert process.wait(timeout=30) == -sig
    assert "Finished server process" in log.read_text()
