"""Real full disks for tests: a small tmpfs, filled with a ballast file the test removes."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BALLAST = "ballast"


@contextmanager
def small_filesystem(path: Path, size: str = "32M") -> Iterator[Path]:
    """A tmpfs of `size` mounted at path (anyone may enter it), unmounted at the end."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a full-disk test: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(filesystem: Path) -> Path:
    """Write a ballast file until the filesystem has no space left; return its path."""
    ballast = filesystem / BALLAST
    chunk = b"\0" * (1 << 20)
    with open(ballast, "ab", buffering=0) as file:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    file.write(chunk[:size])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
    return ballast


def fill_leaving(filesystem: Path, free: int) -> Path:
    """Write a ballast file that leaves `free` bytes, never filling the disk on the way.

    For a disk that a running Trainboard writes to (its database): it never sees ENOSPC.
    """
    ballast = filesystem / BALLAST
    chunk = b"\0" * (1 << 20)
    with open(ballast, "ab", buffering=0) as file:
        while (room := free_bytes(filesystem) - free) > 0:
            file.write(chunk[:room])
    return ballast


def free_bytes(filesystem: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem at path."""
    stats = os.statvfs(filesystem)
    return stats.f_bavail * stats.f_frsize
