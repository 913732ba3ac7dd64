"""The shape the control plane's background loops share: run until stopped, outlive failures."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis


def keep_running(
    name: str,
    step: Callable[[], None],
    stop: threading.Event,
    *,
    log: logging.Logger,
    pause: float = 1.0,
    on_redis_error: Callable[[], None] | None = None,
) -> None:
    """Call step until stop is set; after a Redis outage or any other failure, log it and
    call it again `pause` seconds later (on_redis_error first, to forget what Redis held)."""
    while not stop.is_set():
        try:
            step()
        except redis.RedisError as err:
            log.warning("%s: redis unavailable (%s); retrying", name, err)
            if on_redis_error is not None:
                on_redis_error()
            stop.wait(pause)
        except Exception:
            log.exception("%s failed", name)
            stop.wait(pause)


def every(
    seconds: float,
    name: str,
    step: Callable[[], None],
    stop: threading.Event,
    *,
    log: logging.Logger,
    wait_first: bool = False,
) -> None:
    """Call step every `seconds` until stop is set; a failure is logged and the next call
    comes on time."""
    if wait_first and stop.wait(seconds):
        return
    while not stop.is_set():
        try:
            step()
        except Exception:
            log.exception("%s failed; again in %.0f s", name, seconds)
        stop.wait(seconds)
