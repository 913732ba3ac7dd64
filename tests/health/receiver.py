"""A real webhook receiver for tests: http.server in a thread, recording every POST."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: a stack's environment letting its webhooks reach receivers on loopback (closed by default)
RECEIVER_ENV = {"TRAINBOARD_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}


@dataclass
class Receiver:
    """An http.server in a thread: records every POST; answers 500 to the first `fail` ones."""

    fail: int = 0
    received: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append({"headers": dict(self.headers), "body": body})
                status = 500 if receiver.fail > 0 else 200
                receiver.fail -= 1
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"boom" if status == 500 else b"thanks")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
