"""A hostile job: tries to use the deployment's Redis as a control channel, with raw sockets.

Run as a Trainboard script entrypoint by an ordinary user. argv[1] is JSON: `targets`
(`HOST:PORT` or a unix socket path), `db` (the database number to SELECT first), and
the names it aims at: `logs` (a stream to read),
`events` (a stream to forge a health event into), `batch` (the forged entry's value),
`control` (another attempt's stop key). For each target and command it prints one line
`PROBE <target> <command> blocked <why>` or `PROBE <target> <command> LEAK <reply>`.
Last it prints its whole environment (`ENV name=value`), where no credential may be.
It needs no client library: whatever the rank's interpreter, RESP over a socket works.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def resp(*args: str) -> bytes:
    """One command in Redis's wire protocol."""
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def connect(target: str) -> socket.socket:
    if target.startswith("/"):
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(5)
        client.connect(target)
        return client
    host, port = target.rsplit(":", 1)
    return socket.create_connection((host.strip("[]"), int(port)), timeout=5)


def send(target: str, db: int, *args: str) -> str:
    """The server's replies to SELECT db and one command, on a new connection."""
    with connect(target) as client:
        client.sendall(resp("SELECT", str(db)) + resp(*args))
        reply = b""
        while reply.count(b"\r\n") < 2:  # both replies' first lines (an error closes early)
            chunk = client.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply.decode(errors="replace")


def probe(target: str, db: int, name: str, *args: str) -> None:
    try:
        reply = send(target, db, *args)
    except OSError as err:
        print(f"PROBE {target} {name} blocked {type(err).__name__}", flush=True)
        return
    selected, _, answer = reply.partition("\r\n")
    if not selected.startswith("+"):  # an error reply: NOAUTH, NOPERM ...
        print(f"PROBE {target} {name} blocked {selected.split()[0][1:]}", flush=True)
    elif answer.startswith("-") or not answer:
        print(f"PROBE {target} {name} blocked {answer.split()[0][1:]}", flush=True)
    else:
        print(f"PROBE {target} {name} LEAK {answer[:120]!r}", flush=True)


def main() -> None:
    plan = json.loads(sys.argv[1])
    for target in plan["targets"]:
        db = plan["db"]
        probe(target, db, "ping", "PING")
        probe(target, db, "keys", "KEYS", "*")
        probe(target, db, "read-logs", "XRANGE", plan["logs"], "-", "+", "COUNT", "5")
        probe(target, db, "forge-event", "XADD", plan["events"], "*", "b", plan["batch"])
        probe(target, db, "stop-other", "SET", plan["control"], "cancel")
    for name, value in sorted(os.environ.items()):  # the test looks for a credential in them
        print(f"ENV {name}={value}", flush=True)
    print("probes done", flush=True)


if __name__ == "__main__":
    main()
