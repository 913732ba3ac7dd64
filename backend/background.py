"""The shape the control plane's background loops share: run until stopped, outlive failures."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable

import redis

from backend.deployment_keys import keys_of

#: how long a loop's blocking Redis read (XREAD, XREADGROUP) waits for news before the loop
#: looks at its stop event and its timers; `stop_loops` ends such reads at once
BLOCKING_READ_MS = 1000
#: how long a pub/sub subscriber's wait for a message may last before it looks at its stop
#: event; `stop_loops` ends the wait at once with a message on `wake_channel`
POLL_SECONDS = 1.0


def named_client(url: str) -> redis.Redis:
    """A Redis client whose connections carry a name of their own (see `unblock_readers`)."""
    return redis.Redis.from_url(url, client_name=f"trainboard-{uuid.uuid4().hex[:12]}")


def _name(client: redis.Redis) -> str | None:
    name = client.connection_pool.connection_kwargs.get("client_name")
    return str(name) if name else None


def wake_channel(client: redis.Redis) -> str:
    """A pub/sub channel that only this client's subscribers listen on: `stop_loops` sends
    on it, so that a subscriber's wait for a message (which CLIENT UNBLOCK cannot end) ends
    at once."""
    return keys_of(client).name(f"wake:{_name(client) or 'unnamed'}")


def unblock_readers(client: redis.Redis) -> None:
    """End the blocking reads (XREAD, XREADGROUP) of a named client's connections now.

    Called after the loops' stop event is set, so a stop does not wait out the read: every
    app shutdown (so every API test) waited ~0.1 s on it. Where CLIENT LIST or CLIENT
    UNBLOCK is refused (an ACL), the reads end on their own timeout as before.
    """
    name = _name(client)
    if not name:
        return
    try:
        for connection in client.client_list():
            if connection.get("name") == name and "b" in connection.get("flags", ""):
                client.client_unblock(int(connection["id"]))
    except redis.RedisError:
        pass


def start_loops(loops: list[tuple[str, Callable[[], None]]]) -> list[threading.Thread]:
    """Start each (name, loop) on a daemon thread of its own, named `trainboard-<name>`."""
    threads = [
        threading.Thread(target=target, name=f"trainboard-{name}", daemon=True)
        for name, target in loops
    ]
    for thread in threads:
        thread.start()
    return threads


def stop_loops(
    threads: list[threading.Thread], stop: threading.Event, client: redis.Redis, *, timeout: float
) -> None:
    """Set stop and wait for the loops' threads, ending their blocking reads and their
    subscribers' waits as they start."""
    stop.set()
    with contextlib.suppress(redis.RedisError):  # without Redis they end on their timeouts
        client.publish(wake_channel(client), b"")
    deadline = time.monotonic() + timeout
    # a loop between two reads when the readers were ended blocks again once: end it again,
    # looking soon at first (most loops end within milliseconds), then less and less often
    pause = 0.001
    while (alive := [t for t in threads if t.is_alive()]) and time.monotonic() < deadline:
        unblock_readers(client)
        alive[0].join(timeout=pause)
        pause = min(2 * pause, 0.05)


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


class News:
    """Something the idle loops wait for happened: a job changed (the relay hears every
    process's announcements) or this process's ingest stored points. A loop with nothing to
    do sleeps on its listener instead of asking the database again each second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[threading.Event] = []

    def listen(self) -> threading.Event:
        """A new listener: set by every announcement from now on (the loop clears it)."""
        listener = threading.Event()
        with self._lock:
            self._listeners.append(listener)
        return listener

    def announce(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.set()


def every(
    seconds: float,
    name: str,
    step: Callable[[], bool | None],
    stop: threading.Event,
    *,
    log: logging.Logger,
    wait_first: bool = False,
    news: threading.Event | None = None,
    idle_seconds: float = 0.0,
) -> None:
    """Call step every `seconds` until stop is set; a failure is logged and the next call
    comes on time.

    With a `news` listener, a step that returns False (it found nothing to do) is called
    again only once news comes or `idle_seconds` passed, and never sooner than `seconds`
    after it last ran: no sooner than without news, and not at all while nothing happens.
    Whoever sets stop announces news too, so a sleeping loop ends at once.
    """
    if wait_first and stop.wait(seconds):
        return
    while not stop.is_set():
        if news is not None:
            news.clear()  # what comes during the step wakes the next wait
        try:
            busy = step()
        except Exception:
            log.exception("%s failed; again in %.0f s", name, seconds)
            busy = None
        if busy is False and news is not None and idle_seconds > seconds:
            ended = time.monotonic()
            news.wait(idle_seconds)
            stop.wait(max(0.0, ended + seconds - time.monotonic()))
        else:
            stop.wait(seconds)
