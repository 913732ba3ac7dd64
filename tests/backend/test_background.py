"""`stop_loops` ends the loops' waits on Redis at once, not at their timeouts."""

from __future__ import annotations

import logging
import threading

from backend.background import News, every, named_client, stop_loops, wake_channel
from tests.workers.worker_helpers import wait_for

#: far longer than the stop below may take: only an ended wait lets the loops see stop
WAIT_SECONDS = 60


def test_a_blocked_stream_read_and_a_subscribers_wait_end_when_the_loops_stop(
    redis_url: str,
) -> None:
    client = named_client(redis_url)
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            client.xread({"stream": "$"}, block=WAIT_SECONDS * 1000)

    def subscriber() -> None:
        pubsub = client.pubsub()
        pubsub.subscribe(wake_channel(client))
        while not stop.is_set():
            pubsub.get_message(timeout=WAIT_SECONDS)
        pubsub.close()

    threads = [threading.Thread(target=loop, daemon=True) for loop in (reader, subscriber)]
    for thread in threads:
        thread.start()
    name = client.connection_pool.connection_kwargs["client_name"]
    wait_for(
        lambda: any(c["name"] == name and "b" in c["flags"] for c in client.client_list()),
        what="the reader to block",
    )
    wait_for(
        lambda: client.pubsub_numsub(wake_channel(client))[0][1] == 1,
        what="the subscriber to listen",
    )
    stop_loops(threads, stop, client, timeout=5)
    assert not [t for t in threads if t.is_alive()]
    client.close()


def test_an_idle_loop_sleeps_until_news_and_ends_at_once_when_stopped() -> None:
    """A step that found nothing to do is not called again on its interval (here 10 ms)
    while no news comes; news calls it again; stop with news ends the sleeping loop."""
    news, stop = News(), threading.Event()
    said: list[bool] = []  # what each pass returned: whether it had work
    busy = threading.Event()

    def step() -> bool:
        said.append(busy.is_set())
        return said[-1]

    loop = threading.Thread(
        target=every,
        args=(0.01, "test", step, stop),
        kwargs={"log": logging.getLogger("test"), "news": news.listen(), "idle_seconds": 600},
    )
    loop.start()
    try:
        wait_for(lambda: said, timeout=10, what="the first pass")
        stop.wait(0.5)  # 50 intervals: an idle loop without news sleeps through them
        assert said == [False]
        busy.set()
        news.announce()
        wait_for(lambda: said.count(True) >= 5, timeout=10, what="passes on the interval")
        busy.clear()
        wait_for(lambda: said[-1] is False, timeout=10, what="an idle pass")
        passes = len(said)
        stop.wait(0.5)
        assert len(said) == passes, "an idle loop ran again without news"
    finally:
        stop.set()
        news.announce()
        loop.join(timeout=WAIT_SECONDS)
    assert not loop.is_alive(), "stop with news did not end the sleeping loop"
