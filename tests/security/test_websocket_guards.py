"""The websocket over a real uvicorn: refusals carry their close codes, hostile frames close
cleanly (no traceback), and a connection ends within a second of its credential."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from backend.config import Settings
from tests.backend.conftest import bearer, module_settings
from tests.telemetry.helpers import LiveServer, receive, subscribe


@pytest.fixture
def live(settings: Settings, tokens: dict[str, str]) -> Iterator[LiveServer]:
    with LiveServer.running(settings) as server:
        yield server


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, migrate: Callable[[str], None]
) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    """One server and its tokens for the tests whose connections change nothing stored
    (uvicorn takes a while to stop)."""
    with (
        module_settings(tmp_path_factory, migrate) as (settings, tokens),
        LiveServer.running(settings) as server,
    ):
        yield server, tokens


def _open(live: LiveServer, headers: dict[str, str]) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{live.port}/api/ws", additional_headers=headers)


def _closed_with(ws: ClientConnection) -> tuple[int, str]:
    """The code and reason the server closed ws with (within 5 s)."""
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None, "the server did not send a close frame"
    return closed.value.rcvd.code, closed.value.rcvd.reason


def test_refused_handshakes_reach_a_real_client_with_their_codes(
    shared: tuple[LiveServer, dict[str, str]],
) -> None:
    live, tokens = shared
    foreign = {**bearer(tokens["alice"]), "Origin": "http://evil.example"}
    for headers, refusal in [
        ({}, (4401, "authentication required")),
        (bearer("tb_not-a-token"), (4401, "authentication required")),
        (foreign, (4403, "foreign origin")),
    ]:
        with _open(live, headers) as ws:
            assert _closed_with(ws) == refusal


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"\x00\x01binary", 1003),
        ("not json {", 1007),
        ("[" * 3000 + "]" * 3000, 1009),
        ("[" * 2000 + "]" * 2000, 1007),
        (json.dumps({"op": "subscribe", "topic": "job:" + "9" * 40}), 4422),
        (json.dumps({"op": "subscribe", "topic": "job:2147483648"}), 4422),
        (json.dumps({"op": "unsubscribe", "topic": "job:²"}), 4422),
        (json.dumps({"op": "subscribe", "topic": "x" * 200}), 4422),
    ],
)
def test_hostile_frames_close_with_the_documented_code_and_no_traceback(
    shared: tuple[LiveServer, dict[str, str]],
    caplog: pytest.LogCaptureFixture,
    frame: Any,
    code: int,
) -> None:
    live, tokens = shared
    with caplog.at_level(logging.ERROR), _open(live, bearer(tokens["alice"])) as ws:
        ws.send(frame)
        assert _closed_with(ws)[0] == code
        with _open(live, bearer(tokens["alice"])) as again:  # the server goes on serving
            subscribe(again, "job:2147483647")
            assert receive(again)["type"] == "error"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def _closed_within(ws: ClientConnection, started: float) -> float:
    code, reason = _closed_with(ws)
    assert (code, reason) == (4401, "credentials revoked")
    return time.monotonic() - started


def test_revoking_a_token_closes_its_websocket_within_a_second(
    live: LiveServer, tokens: dict[str, str]
) -> None:
    with httpx.Client(base_url=live.url, headers=bearer(tokens["alice"])) as api:
        minted = api.post("/api/tokens", json={"scopes": ["read"]}).json()
        with (
            _open(live, bearer(minted["token"])) as ws,
            _open(live, bearer(tokens["alice"])) as kept,
        ):
            subscribe(ws, "jobs")
            assert receive(ws)["type"] == "snapshot"
            assert api.delete(f"/api/tokens/{minted['id']}").status_code == 204
            started = time.monotonic()  # the revocation is committed by now
            assert _closed_within(ws, started) < 1.0
            subscribe(kept, "jobs")  # another token's connection stays open
            assert receive(kept)["type"] == "snapshot"


@contextlib.contextmanager
def _cookie_socket(live: LiveServer, browser: httpx.Client) -> Iterator[ClientConnection]:
    cookie = f"trainboard_session={browser.cookies['trainboard_session']}"
    with _open(live, {"Cookie": cookie}) as ws:
        subscribe(ws, "jobs")
        assert receive(ws)["type"] == "snapshot"
        yield ws


def test_logout_and_a_password_reset_close_the_sessions_websockets(
    live: LiveServer, tokens: dict[str, str]
) -> None:
    with httpx.Client(base_url=live.url) as browser:
        assert browser.post("/api/login", json={"token": tokens["alice"]}).status_code == 200
        with _cookie_socket(live, browser) as ws:
            assert browser.post("/api/logout").status_code == 204
            started = time.monotonic()
            assert _closed_within(ws, started) < 1.0
    with httpx.Client(base_url=live.url, headers=bearer(tokens["admin"])) as admin:
        user = admin.post(
            "/api/users", json={"username": "carol", "password": "a-long-password"}
        ).json()
        with httpx.Client(base_url=live.url) as browser:
            login = {"username": "carol", "password": "a-long-password"}
            assert browser.post("/api/login", json=login).status_code == 200
            with _cookie_socket(live, browser) as ws:
                reset = admin.put(
                    f"/api/users/{user['id']}/password", json={"password": "another-password"}
                )
                assert reset.status_code == 204  # argon2 takes its time: measured from here
                started = time.monotonic()
                assert _closed_within(ws, started) < 1.0
