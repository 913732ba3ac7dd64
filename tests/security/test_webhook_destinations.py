"""Webhooks reach public addresses only, unless the operator lists more (#30 finding 6):
every textual form of an internal address is refused at creation and again at delivery,
against the addresses the delivery connects to; redirects are not followed; a delivery
keeps its status and timing, never the answer's body; every failure reads the same,
whatever listened on the port."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.app import create_app
from backend.auth.models import User
from backend.config import Settings
from backend.db import Database
from backend.webhooks.delivery import COULD_NOT_CONNECT, REFUSED, Poster, deliver_due
from backend.webhooks.destination import AllowList, DestinationRefused, checked_addresses
from backend.webhooks.models import Webhook, WebhookDelivery
from tests.backend.conftest import bearer

#: hosts that name an internal address, in the forms a URL can spell them
INTERNAL = [
    "127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "017700000001",
    "localhost", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "0.0.0.0", "0", "[::]",
    "169.254.169.254", "[fe80::1]", "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1",
    "[fd00::1]", "[fc00::1]", "224.0.0.1", "[ff02::1]", "240.0.0.1", "255.255.255.255",
    "[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[2001:db8::1]", "192.0.2.1",
]  # fmt: skip
PUBLIC = ["8.8.8.8", "[2606:4700:4700::1111]", "1.1.1.1"]


@pytest.mark.parametrize("host", INTERNAL)
def test_every_form_of_an_internal_address_is_refused_by_default(host: str) -> None:
    with pytest.raises(DestinationRefused, match="internal address"):
        checked_addresses(AllowList.parse(""), host, 80)
    with pytest.raises(DestinationRefused, match="internal address"):
        checked_addresses(AllowList.parse("*, hooks.example.com"), host, 80)


@pytest.mark.parametrize("host", PUBLIC)
def test_public_addresses_pass_unless_the_list_names_only_others(host: str) -> None:
    assert checked_addresses(AllowList.parse(""), host, 443)
    with pytest.raises(DestinationRefused, match="not in TRAINBOARD_WEBHOOK_ALLOWED_HOSTS"):
        checked_addresses(AllowList.parse("hooks.example.com, 10.0.0.0/8"), host, 443)


def test_the_operator_opens_an_internal_receiver_by_name_or_network() -> None:
    assert checked_addresses(AllowList.parse("localhost"), "localhost", 80)
    by_network = AllowList.parse("127.0.0.0/8, 10.1.0.0/16")
    assert [str(a) for a in checked_addresses(by_network, "2130706433", 80)] == ["127.0.0.1"]
    assert checked_addresses(by_network, "10.1.2.3", 80)
    with pytest.raises(DestinationRefused):
        checked_addresses(by_network, "10.2.0.1", 80)
    with pytest.raises(DestinationRefused):  # the name is listed, not its other spellings
        checked_addresses(AllowList.parse("localhost"), "127.1", 80)


@pytest.fixture
def strict_api(settings: Settings, tokens: dict[str, str]) -> Iterator[TestClient]:
    """The app with the default destinations (public addresses only), creation unlimited."""
    default = {"webhook_allowed_hosts": "", "webhook_rate_limit": 1000}
    with TestClient(create_app(settings.model_copy(update=default))) as client:
        yield client


def test_creating_a_webhook_to_an_internal_address_is_refused_with_the_reason(
    strict_api: TestClient, tokens: dict[str, str]
) -> None:
    alice = bearer(tokens["alice"])
    for host in INTERNAL:
        response = strict_api.post(
            "/api/webhooks", json={"url": f"http://{host}:8080/x"}, headers=alice
        )
        assert response.status_code == 422, (host, response.text)
        assert "internal address" in response.text and "ALLOWED_HOSTS" in response.text
    assert strict_api.get("/api/webhooks", headers=alice).json() == []
    # a public literal and a name that does not resolve here are taken (delivery checks again)
    for url in ("https://8.8.8.8/x", "https://hooks.example.com/x"):
        assert strict_api.post("/api/webhooks", json={"url": url}, headers=alice).status_code == 201


class Servers:
    """Real local listeners: an HTTP receiver (any status, a 1 KiB body), a closed port,
    a port that speaks something else, and one that never answers."""

    def __init__(self) -> None:
        self.received: list[dict[str, str]] = []
        self.status = 200
        servers = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers["Content-Length"]))
                servers.received.append(dict(self.headers))
                self.send_response(servers.status)
                self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                self.end_headers()
                self.wfile.write(b"internal secret " * 64)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        self.closed_port = closed.getsockname()[1]
        closed.close()
        self.banner, self.silent = socket.socket(), socket.socket()
        for listener in (self.banner, self.silent):
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
        threading.Thread(target=self._speak_ssh, daemon=True).start()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._hold, daemon=True).start()

    def _speak_ssh(self) -> None:
        while True:
            try:
                conn, _ = self.banner.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            conn.close()

    def _hold(self) -> None:
        while True:
            try:
                self.held.append(self.silent.accept()[0])
            except OSError:
                return

    def port(self, kind: str) -> int:
        ports = {
            "http": self.http.server_port,
            "closed": self.closed_port,
            "banner": self.banner.getsockname()[1],
            "silent": self.silent.getsockname()[1],
        }
        return ports[kind]

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        for sock in (self.banner, self.silent, *self.held):
            sock.close()


@pytest.fixture
def servers() -> Iterator[Servers]:
    made = Servers()
    yield made
    made.close()


def _deliver_once(database: Database, url: str, poster: Poster) -> WebhookDelivery:
    """A webhook row for url (as if created under another allow-list) and one delivery try."""
    with database.session() as session:
        user = session.scalars(select(User).where(User.username == "alice")).one()
        hook = Webhook(owner_id=user.id, url=url, secret="s", events=["failed"])
        session.add(hook)
        session.flush()
        session.add(WebhookDelivery(webhook_id=hook.id, event="failed", payload={"event": "x"}))
    with database.session() as session:
        assert deliver_due(session, lambda: poster) == 1
    with database.session() as session:
        row = session.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id.desc())).first()
        assert row is not None
        session.expunge(row)
        return row


def test_delivery_checks_the_addresses_it_connects_to(
    database: Database, tokens: dict[str, str], servers: Servers
) -> None:
    # a webhook made while 127.0.0.1 was allowed (or a name that resolved elsewhere then)
    # reaches nothing once the check at delivery time refuses the address
    poster = Poster(AllowList.parse(""))
    for host in ("127.0.0.1", "127.1", "2130706433", "localhost", "[::ffff:127.0.0.1]"):
        row = _deliver_once(database, f"http://{host}:{servers.port('http')}/hook", poster)
        assert (row.response_status, row.duration_ms, row.error) == (None, None, REFUSED)
    assert servers.received == []
    poster.close()


def test_a_delivery_keeps_status_and_timing_keeps_the_host_and_follows_no_redirect(
    database: Database, tokens: dict[str, str], servers: Servers
) -> None:
    poster = Poster(AllowList.parse("localhost"))
    url = f"http://localhost:{servers.port('http')}/hook"
    ok = _deliver_once(database, url, poster)
    assert (ok.state, ok.response_status, ok.error) == ("delivered", 200, None)
    assert ok.duration_ms is not None and 0 <= ok.duration_ms < 5000
    assert servers.received[-1]["Host"] == f"localhost:{servers.port('http')}"
    servers.status = 302  # to the metadata address: recorded, never followed
    moved = _deliver_once(database, url, poster)
    assert (moved.state, moved.response_status) == ("pending", 302)
    assert len(servers.received) == 2
    poster.close()


def test_the_deliveries_list_shows_no_answer_body(
    settings: Settings, tokens: dict[str, str], servers: Servers
) -> None:
    loopback = settings.model_copy(update={"webhook_allowed_hosts": "127.0.0.1"})
    with TestClient(create_app(loopback)) as api:
        alice = bearer(tokens["alice"])
        url = f"http://127.0.0.1:{servers.port('http')}/hook"
        hook = api.post("/api/webhooks", json={"url": url}, headers=alice).json()
        poster = Poster(AllowList.parse("127.0.0.1"))
        database = api.app.state.db  # type: ignore[attr-defined]
        with database.session() as session:
            session.add(WebhookDelivery(webhook_id=hook["id"], event="failed", payload={}))
        with database.session() as session:
            deliver_due(session, lambda: poster)
        poster.close()
        [shown] = api.get(f"/api/webhooks/{hook['id']}/deliveries", headers=alice).json()
    assert shown["response_status"] == 200 and shown["duration_ms"] is not None
    assert "internal secret" not in str(shown) and "response_body" not in shown


def test_closed_open_and_non_http_ports_read_the_same(
    database: Database, tokens: dict[str, str], servers: Servers
) -> None:
    poster = Poster(AllowList.parse("127.0.0.1"), timeout=0.5)
    seen = {}
    for kind in ("closed", "banner", "silent"):
        row = _deliver_once(database, f"http://127.0.0.1:{servers.port(kind)}/", poster)
        seen[kind] = (row.state, row.response_status, row.duration_ms, row.error)
    poster.close()
    assert set(seen.values()) == {("pending", None, None, COULD_NOT_CONNECT)}, seen
