"""Websocket clients on raw sockets for the fan-out benchmark: frames split by hand and
timestamped by the kernel, so 1,000 of them in one process measure the server, not themselves."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import select
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

#: Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS); Python's socket module does not name it
SO_TIMESTAMPNS = 35


class RawClient:
    """A websocket client on a raw socket that splits frames and timestamps them.

    1,000 full websocket clients in one Python process would measure their own
    message handling: the last of them reads a delta long after the server sent it.
    So each frame keeps two times: when the client read it, and when its bytes
    arrived at the client's socket (the kernel's receive timestamp: on loopback,
    when the server's write went through). JSON is parsed, and compressed frames
    inflated, after the run.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: (arrived, read, compressed, payload)
        self.frames: list[tuple[float, float, bool, bytes]] = []
        #: text frames the kernel gave no timestamp for: they count as arrived when read
        self.unstamped = 0
        #: text frames read together with a later frame: they carry its (later) arrival time
        self.shared = 0
        self.handshake = asyncio.get_running_loop().create_future()
        self.buffer = b""

    def readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(1 << 20, 64)
        except BlockingIOError:
            return
        read = time.time()
        if not data:
            asyncio.get_running_loop().remove_reader(self.sock)
            return
        arrived, stamped = read, False
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = struct.unpack("qq", value[:16])
                arrived, stamped = seconds + nanoseconds / 1e9, True
        self.buffer += data
        if not self.handshake.done():
            head, found, rest = self.buffer.partition(b"\r\n\r\n")
            if not found:
                return
            self.handshake.set_result(head)
            self.buffer = rest
        texts = frames = 0
        last_is_text = False
        while len(self.buffer) >= 2:
            opcode, length, offset = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F, 2
            if length == 126:
                length, offset = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                length, offset = int.from_bytes(self.buffer[2:10], "big"), 10
            if len(self.buffer) < offset + length:
                break
            frames += 1
            last_is_text = opcode == 0x1
            payload = self.buffer[offset : offset + length]
            compressed = bool(self.buffer[0] & 0x40)  # RSV1: permessage-deflate
            self.buffer = self.buffer[offset + length :]
            if opcode == 0x1:  # text (the server sends each message in one frame)
                self.frames.append((arrived, read, compressed, payload))
                self.unstamped += not stamped
                texts += 1
            elif opcode == 0x9:  # ping: answer, or the server closes the connection
                self.sock.send(_masked_frame(0xA, payload))
        if frames > 1:  # the kernel stamps a read with the arrival of its last bytes
            self.shared += texts - last_is_text

    def messages(self) -> Iterator[tuple[float, float, dict[str, Any]]]:
        """(arrived, read, message) of every text frame, inflated where compressed."""
        inflater = zlib.decompressobj(wbits=-15)  # one per connection: context takeover or not
        for arrived, read, compressed, payload in self.frames:
            if compressed:
                payload = inflater.decompress(payload + b"\x00\x00\xff\xff")
            yield arrived, read, json.loads(payload)


def _masked_frame(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    assert len(payload) < 126
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


async def raw_client(port: int, topic: str, *, token: str, deflate: bool) -> RawClient:
    """A connected client of `/api/ws` on `topic`, its handshake checked."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    client = RawClient(sock)
    loop.add_reader(sock, client.readable)
    key = base64.b64encode(os.urandom(16)).decode()
    offer = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    sock.send(
        (
            f"GET /api/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n{offer if deflate else ''}"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(client.handshake, 60)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert (b"permessage-deflate" in head.lower()) == deflate, head
    subscription = json.dumps({"op": "subscribe", "topic": topic}).encode()
    sock.send(_masked_frame(0x1, subscription))
    return client


class Bursts:
    """Reads every client once per delivery burst, a while after the burst began.

    A client that reads each frame as it arrives wakes up 1,000 times per delta and
    competes for the server's cores while the server is still sending; remote
    browsers would not. Reading later loses nothing: each frame keeps its kernel
    arrival time (a socket that got two deltas before it was read reports the
    later arrival for both, so that errs on the slow side).
    """

    def __init__(self, clients: list[RawClient], delay: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.delay = delay
        self.poller = select.epoll()
        self.clients = {client.sock.fileno(): client for client in clients}
        for fd in self.clients:
            self.loop.remove_reader(fd)
            self.poller.register(fd, select.EPOLLIN)
        self.loop.add_reader(self.poller.fileno(), self.began)

    def began(self) -> None:
        self.loop.remove_reader(self.poller.fileno())
        self.loop.call_later(self.delay, self.drain)

    def drain(self) -> None:
        for fd, _ in self.poller.poll(0):
            self.clients[fd].readable()
        self.loop.add_reader(self.poller.fileno(), self.began)

    def close(self) -> None:
        self.loop.remove_reader(self.poller.fileno())
        self.poller.close()
