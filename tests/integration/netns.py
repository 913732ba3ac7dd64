"""Two hosts on one machine: Linux network namespaces joined by a veth pair (root only).

`ip netns exec NAME cmd` runs a process "on host NAME"; both hosts see one filesystem.
The root namespace has no route to their addresses, so this test process talks to them
from a thread that entered host A's namespace (`in_host`). Everything is removed after.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import pytest

T = TypeVar("T")
CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Host:
    namespace: str
    interface: str
    address: str

    def command(self, argv: list[str]) -> list[str]:
        """argv run on this host."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def two_hosts(tag: str) -> Iterator[tuple[Host, Host]]:
    """Hosts A and B on 10.<x>.<y>.0/24; skips where the kernel or user cannot make them."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("two-host tests need root and iproute2 (`ip netns`): not available here")
    octet = os.getpid() % 250 + 2
    a = Host(f"tb{tag}A{os.getpid()}", f"tb{tag}a{os.getpid()}"[:15], f"10.231.{octet}.1")
    b = Host(f"tb{tag}B{os.getpid()}", f"tb{tag}b{os.getpid()}"[:15], f"10.231.{octet}.2")
    made = _ip("netns", "add", a.namespace)
    if made.returncode != 0:
        pytest.skip(f"the kernel refused a network namespace: {made.stderr.strip()}")
    try:
        steps = [
            ("netns", "add", b.namespace),
            ("link", "add", a.interface, "type", "veth", "peer", "name", b.interface),
            ("link", "set", a.interface, "netns", a.namespace),
            ("link", "set", b.interface, "netns", b.namespace),
        ]
        for host in (a, b):
            steps += [
                ("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface),
                ("-n", host.namespace, "link", "set", "lo", "up"),
                ("-n", host.namespace, "link", "set", host.interface, "up"),
            ]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"the kernel refused `ip {' '.join(step)}`: {done.stderr.strip()}")
        yield a, b
    finally:
        _ip("netns", "del", b.namespace)  # takes the veth pair with it
        _ip("netns", "del", a.namespace)


def set_link(host: Host, up: bool) -> None:
    """Take a host's end of the link down (a partition) or up again."""
    done = _ip("-n", host.namespace, "link", "set", host.interface, "up" if up else "down")
    assert done.returncode == 0, done.stderr


class InHost:
    """Runs calls on one thread that lives in a host's network namespace."""

    def __init__(self, host: Host) -> None:
        self._pool = ThreadPoolExecutor(1, initializer=self._enter, initargs=(host,))
        self._entered = threading.Event()

    def _enter(self, host: Host) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{host.namespace}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:  # this thread only: the others stay
                raise OSError(ctypes.get_errno(), f"setns into {host.namespace}")
        finally:
            os.close(fd)
        self._entered.set()

    def __call__(self, fn: Callable[[], T]) -> T:
        return self._pool.submit(fn).result()

    def close(self) -> None:
        self._pool.shutdown()
