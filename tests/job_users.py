"""Test directories a job's ranks can reach: as root, ranks run as an unprivileged job user.

pytest makes every temporary directory 0700; a rank running as uid `base + job id` could
not reach its run directory under one. Tests open the path (search only, o+x) the way an
operator makes a data dir reachable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


def reachable(path: Path) -> Path:
    """Give others search (x) permission on path and every ancestor this user owns."""
    path.mkdir(parents=True, exist_ok=True)
    for directory in [path, *path.parents]:
        info = directory.stat()
        if info.st_uid == os.geteuid() and not info.st_mode & stat.S_IXOTH:
            os.chmod(directory, stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
    return path


@contextlib.contextmanager
def open_scratch(prefix: str) -> Iterator[Path]:
    """A scratch directory (0711) outside pytest's own, removed afterwards.

    A concurrent pytest session makes /tmp/pytest-of-<user> 0700 again when it starts,
    and a job user could then no longer reach anything under a test's tmp_path.
    """
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(directory, 0o711)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
