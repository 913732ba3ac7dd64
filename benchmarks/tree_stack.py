"""`trainboard up` with the code of another tree (a `git worktree` or `git archive` of the
commit to compare against), for the benchmarks that alternate trees in one run
(`idle_cost`, `submit_latency`), each with a `sitecustomize` of its own in the processes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tests.stack import EMBEDDED_REDIS, RunningStack, trainboard_up


@contextlib.contextmanager
def stack_from(tree: Path, tmp: Path, *, env: dict[str, str], site: str) -> Iterator[RunningStack]:
    """`trainboard up` with the code of tree (its own private Redis), `site` its processes'
    sitecustomize and `env` added to their environment."""
    names = tmp / "names"
    names.mkdir()
    (names / "sitecustomize.py").write_text(site)
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ["PYTHONPATH"] = f"{names}:{tree}"
    os.environ.update(env)
    os.chdir(tree)  # `python -m` puts the working directory first on sys.path
    try:
        with trainboard_up(tmp, EMBEDDED_REDIS, cpu_slots=2) as stack:
            os.chdir(saved_cwd)
            yield stack
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
