"""`stop_loops` ends the loops' waits on Redis at once, not at their timeouts."""

from __future__ import annotations

import threading

from backend.background import named_client, stop_loops, wake_channel
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
