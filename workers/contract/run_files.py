"""Opening files inside a job's directories without following anything the job planted.

A job's ranks own `runs/job-<id>/` and everything below it, and may swap any directory there
for a symlink at any moment (an atomic rename, in a loop). Checking a path and then opening
it, or opening it with O_NOFOLLOW (which guards only the last component), can then read
another job's files. Here every component is opened relative to the descriptor of the one
above, from the runs root down, with O_NOFOLLOW (and O_DIRECTORY for directories), and what
is read is read from the descriptor: a link anywhere is refused, never followed. Used by the
control plane (checkpoint listing, download, clone) and the supervisor alike (no backend import).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from workers.contract.run_layout import RUNS

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: a FIFO planted as a file would otherwise block the open until a writer comes
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeRunPath(OSError):
    """A component that is missing, a symlink, or not the kind of file expected."""


def _checked(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise UnsafeRunPath(f"{name[:100]!r} is not one plain name")
    return name


def open_dir_below(dir_fd: int, parts: Sequence[str]) -> int:
    """A new descriptor of dir_fd/parts..., every component a real directory (no link)."""
    fd = os.dup(dir_fd)
    try:
        for part in parts:
            next_fd = os.open(_checked(part), DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except OSError as err:
        os.close(fd)
        if isinstance(err, UnsafeRunPath):
            raise
        raise UnsafeRunPath(err.errno, f"{'/'.join(parts)[:300]} is not a plain directory") from err
    return fd


def open_run_dir(data_dir: str | os.PathLike[str], parts: Sequence[str]) -> int:
    """A descriptor of <data_dir>/runs/parts...: the runs root is the operator's (its path may
    hold links), every component below it is opened without following one."""
    try:
        root = os.open(Path(data_dir) / RUNS, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise UnsafeRunPath(err.errno, f"no runs directory in {data_dir}") from err
    try:
        return open_dir_below(root, parts)
    finally:
        os.close(root)


@contextmanager
def run_dir(data_dir: str | os.PathLike[str], parts: Sequence[str]) -> Iterator[int]:
    """`open_run_dir` as a context: the descriptor is closed on exit."""
    fd = open_run_dir(data_dir, parts)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(dir_fd: int, name: str) -> int:
    """A descriptor of the regular file dir_fd/name (not a link, FIFO, device or directory)."""
    try:
        fd = os.open(_checked(name), FILE_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if isinstance(err, UnsafeRunPath):
            raise
        raise UnsafeRunPath(err.errno, f"{name[:100]} is not a plain file") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeRunPath(f"{name[:100]} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def file_stat(dir_fd: int, name: str) -> os.stat_result | None:
    """The stat of the regular file dir_fd/name (not followed if a link); None if it is not one."""
    try:
        info = os.stat(_checked(name), dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def subdirectories(dir_fd: int) -> list[str]:
    """Names of the real directories in dir_fd (one scan, by the entry type: no link)."""
    with os.scandir(dir_fd) as entries:
        return [e.name for e in entries if e.is_dir(follow_symlinks=False)]


def regular_files(dir_fd: int) -> dict[str, int]:
    """Name and size of each regular file directly in dir_fd (links and the rest left out).

    A file deleted between the scan and its stat (a job pruning its old checkpoints while
    they are listed) is left out.
    """
    found = {}
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode):
                found[entry.name] = info.st_size
    return found


def read_file(dir_fd: int, name: str, *, max_bytes: int) -> bytes:
    """The bytes of the regular file dir_fd/name, read from its descriptor; refused if larger."""
    fd = open_file(dir_fd, name)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeRunPath(f"{name[:100]} is larger than {max_bytes} bytes")
    return data
