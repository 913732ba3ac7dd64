"""One attempt's Redis traffic: the streams it writes (logs, metrics, events), its control key."""

from __future__ import annotations

import logging
import threading

import redis

from workers.contract.keys import Keys
from workers.contract.protocol import (
    EVENTS_STREAM,
    LOGS_STREAM,
    METRICS_STREAM,
    AttemptOrder,
    StopRequest,
)
from workers.telemetry import StreamPublisher, producer_name

log = logging.getLogger(__name__)

#: what the control plane may ask of a running attempt through its control key


class AttemptStreams:
    """The publishers of one attempt, each a producer named for the node and attempt."""

    def __init__(
        self, order: AttemptOrder, redis_url: str, *, logs: StreamPublisher | None = None
    ) -> None:
        self._order, self._redis_url = order, redis_url
        self._keys = Keys(order.deployment)  # this deployment's names in Redis
        self._own_logs = logs is None
        self.logs = logs or self._publisher(LOGS_STREAM, "")
        self.metrics = self._publisher(METRICS_STREAM, "-metrics")
        self.events = self._publisher(EVENTS_STREAM, "-events")
        #: metric points parsed from a user program's stdout (entrypoint jobs only)
        self.stdout_metrics: StreamPublisher | None = None

    def _publisher(self, stream: str, suffix: str) -> StreamPublisher:
        producer = producer_name(self._order.node, f"attempt-{self._order.attempt_id}{suffix}")
        return StreamPublisher(self._redis_url, self._keys.stream(stream), producer)

    def open_stdout_metrics(self) -> StreamPublisher:
        """The publisher of the metric points parsed from the ranks' stdout."""
        if self.stdout_metrics is None:
            self.stdout_metrics = self._publisher(METRICS_STREAM, "-stdout")
        return self.stdout_metrics

    def close(self) -> None:
        """Close every publisher this attempt opened (a logs publisher it was given stays)."""
        if self._own_logs:
            self.logs.close()
        self.metrics.close()
        self.events.close()
        if self.stdout_metrics is not None:
            self.stdout_metrics.close()


class ControlKey:
    """The stop request for one attempt: the control plane's (cancel, pause, preempt), if any,
    or `shutdown` once the node agent is going away."""

    def __init__(self, order: AttemptOrder, redis_url: str, *, shutdown: threading.Event) -> None:
        self._shutdown = shutdown
        self._attempt_id = order.attempt_id
        self._key = Keys(order.deployment).control(order.attempt_id)
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=2.0)

    def request(self) -> str | None:
        """The request now; None when there is none or Redis does not answer (asked again)."""
        if self._shutdown.is_set():
            return "shutdown"
        try:
            value = self._redis.get(self._key)
        except redis.RedisError as err:
            log.warning("attempt %d: cannot read control key: %s", self._attempt_id, err)
            return None
        request = value.decode() if isinstance(value, bytes) else value
        if request is None:
            return None
        try:
            return StopRequest(request).value  # cancel, pause or preempt: the contract's enum
        except ValueError:  # not a request
            return None

    def close(self) -> None:
        """Close the connection."""
        self._redis.close()
