"""A server in a process of its own, for as long as a benchmark needs it."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def spawned(serve: Callable[..., None], *args: Any) -> Iterator[Any]:
    """`serve(*args, ready, stop)` in a spawned daemon process: yields what it puts on `ready`
    (within 60 s); on the way out `stop` is set, the process has 15 s to return, then it is
    killed."""
    context = mp.get_context("spawn")
    ready, stop = context.Queue(), context.Event()
    process = context.Process(target=serve, args=(*args, ready, stop), daemon=True)
    process.start()
    try:
        yield ready.get(timeout=60)
    finally:
        stop.set()
        process.join(15)
        if process.is_alive():
            process.kill()
