"""Telemetry ingest: Redis Streams consumer group → database → live stream for the hubs.

At-least-once: entries are acknowledged only after their transaction commits (the
XACKs and the live-stream XADDs go in one MULTI/EXEC), and every row has an
idempotent key, so a replayed or reclaimed entry adds nothing. A dead consumer's
pending entries are taken over with XAUTOCLAIM once idle, or at once when the consumer
was a process of this host that is gone (`trainboard up` restarting a killed API).
Streams are trimmed only below the group's oldest unacknowledged entry. While one
round commits (on a thread of its own), the next is read and validated; rounds still
commit, are acknowledged and go live in the order they were read.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import msgspec
import psutil
import redis

from backend.background import BLOCKING_READ_MS, keep_running
from backend.db import Database
from backend.deployment_keys import keys_of
from backend.signals import announce_jobs
from backend.telemetry.ingest.entries import decode_entry
from backend.telemetry.ingest.points import Points
from backend.telemetry.ingest.rounds import CommitPipeline, Round, Written
from backend.telemetry.ingest.streams import as_text, trim_acknowledged
from backend.telemetry.ingest.wal import WalCheckpoints, checkpoints_apart
from backend.telemetry.ingest.writer import write_batch
from backend.telemetry.live import feed
from workers.contract.protocol import BATCH_FIELD, INGEST_GROUP, METRICS_STREAM

log = logging.getLogger(__name__)

PROGRESS_ANNOUNCE_SECONDS = 1.0
TRIM_EVERY_SECONDS = 5.0
#: entries read per stream and round. PostgreSQL: 100 (up to 50,000 metric points), so a
#: backlog goes in rounds small enough that validating one overlaps the previous one's
#: commit; SQLite has no commit thread, and fewer, larger transactions checkpoint its WAL
#: less often (both measured, docs/benchmarks.md)
ROUND_ENTRIES = {"postgresql": 100, "sqlite": 500}
Entries = dict[str, list[tuple[Any, dict[Any, Any]]]]


def consumer_name() -> str:
    """This process's name in the ingest group: its host and pid, so a successor can tell
    whether the process that holds pending entries is gone."""
    return f"{socket.gethostname()}-{os.getpid()}"


def gone_from_this_host(name: str) -> bool:
    """Whether a consumer named by `consumer_name` was a process of this host that is gone.

    A reused pid reads as alive: those entries wait for the idle reclaim instead.
    """
    host, _, pid = name.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    return not psutil.pid_exists(int(pid))


class Ingest:
    """Reads every telemetry stream with one consumer of the ingest group."""

    def __init__(
        self,
        *,
        db: Database,
        client: redis.Redis,
        consumer: str,
        count: int | None = None,
        reclaim_idle_ms: int = 30_000,
        log_lines_per_attempt: int | None = None,
        on_progress: Callable[[set[int]], object] | None = None,
    ) -> None:
        self.db = db
        #: called with the ids of the jobs whose step moved, once their points are committed
        #: (the sweeps' early-stopping rule judges them on the live metric, not a second late)
        self.on_progress = on_progress
        self.client = client
        self.consumer = consumer
        #: entries read per stream and round (None: ROUND_ENTRIES for the database)
        self.count = count
        self.reclaim_idle_ms = reclaim_idle_ms
        #: log lines kept per attempt, the oldest deleted beyond it (None: every line)
        self.log_lines_per_attempt = log_lines_per_attempt
        #: items producers reported dropping (lossy streams only), since this process started
        self.dropped = 0
        self._announced: dict[int, float] = {}
        #: this deployment's stream of each kind, and back
        self._streams = keys_of(client).streams()
        self._kinds = {name: kind for kind, name in self._streams.items()}
        self._live = keys_of(client).name(feed.LIVE_STREAM)
        #: while `run` runs on SQLite: what checkpoints the log instead of the commits
        self._wal: WalCheckpoints | None = None

    def ensure_groups(self) -> None:
        for stream in self._streams.values():
            try:
                self.client.xgroup_create(stream, INGEST_GROUP, id="0", mkstream=True)
            except redis.ResponseError as err:
                if "BUSYGROUP" not in str(err):
                    raise

    def run(self, stop: threading.Event) -> None:
        """Consume until stop is set; survives Redis outages and flushes."""
        last_reclaim = last_trim = 0.0

        def consume_until_stopped() -> None:
            nonlocal last_reclaim, last_trim
            self.ensure_groups()
            while self.consume(pending=True):  # own entries read before a restart
                pass
            self.reclaim_from_gone()  # a killed predecessor's round, not 30 s later
            with self._pipeline() as pipeline:
                while not stop.is_set():
                    now = time.monotonic()
                    if now - last_reclaim > self.reclaim_idle_ms / 2000:
                        pipeline.wait()
                        self.reclaim()
                        last_reclaim = now
                    if now - last_trim > TRIM_EVERY_SECONDS:
                        for stream in self._streams.values():
                            trim_acknowledged(self.client, stream)
                        last_trim = now
                    pipeline.submit(self.prepare(self.read(block_ms=BLOCKING_READ_MS)))

        if checkpoints_apart(self.db.engine):
            self._wal = WalCheckpoints(self.db.engine)
        try:
            keep_running("ingest", consume_until_stopped, stop, log=log)
        finally:
            wal, self._wal = self._wal, None
            if wal is not None:
                wal.close()

    def drain(self) -> int:
        """Consume until nothing new is left, pipelined as `run` does; the entries stored."""
        total = 0
        with self._pipeline() as pipeline:
            while round_ := self.prepare(self.read()):
                total += len(round_)
                pipeline.submit(round_)
        return total

    def _round_entries(self) -> int:
        return self.count or ROUND_ENTRIES.get(self.db.engine.dialect.name, 100)

    def _pipeline(self) -> CommitPipeline:
        # a commit thread pays where the database works in another process (PostgreSQL);
        # SQLite's inserts run here, and a second thread only contends for the GIL
        threaded = self.db.engine.dialect.name != "sqlite"
        return CommitPipeline(self.write, self.publish, threaded=threaded)

    def consume(self, *, block_ms: int | None = None, pending: bool = False) -> int:
        """Read one round of entries (own pending ones first when asked) and store them."""
        return self.commit(self.prepare(self.read(block_ms=block_ms, pending=pending)))

    def read(self, *, block_ms: int | None = None, pending: bool = False) -> Entries:
        """One round of entries from every stream: new ones, or this consumer's pending ones."""
        start = "0" if pending else ">"
        response = self.client.xreadgroup(
            INGEST_GROUP,
            self.consumer,
            {s: start for s in self._streams.values()},
            count=self._round_entries(),
            block=block_ms,
        )
        rounds: list[Any] = response or []  # type: ignore[assignment]
        return {as_text(stream): messages for stream, messages in rounds}

    def reclaim(self) -> int:
        """Take over entries a dead consumer read but never acknowledged (XAUTOCLAIM)."""
        total = 0
        for stream in self._streams.values():
            cursor = "0-0"
            while True:
                cursor, messages, *_ = self.client.xautoclaim(
                    stream,
                    INGEST_GROUP,
                    self.consumer,
                    min_idle_time=self.reclaim_idle_ms,
                    start_id=cursor,
                    count=self._round_entries(),
                )
                if messages:
                    log.info("ingest: reclaimed %d entries of %s", len(messages), stream)
                    total += self.store({stream: messages})
                if as_text(cursor) == "0-0":
                    break
        return total

    def reclaim_from_gone(self) -> int:
        """Take over, at once, the entries pending with consumers of this host that are gone."""
        total = 0
        for stream in self._streams.values():
            consumers: Any = self.client.xinfo_consumers(stream, INGEST_GROUP)
            for consumer in consumers:
                name = as_text(consumer["name"])
                if not consumer["pending"] or not gone_from_this_host(name):
                    continue
                while pending := self.client.xpending_range(
                    stream, INGEST_GROUP, "-", "+", self._round_entries(), consumername=name
                ):
                    ids: list[Any] = [entry["message_id"] for entry in pending]
                    messages: Any = self.client.xclaim(
                        stream, INGEST_GROUP, self.consumer, min_idle_time=0, message_ids=ids
                    )
                    claimed = {as_text(entry_id) for entry_id, _ in messages}
                    trimmed = [i for i in ids if as_text(i) not in claimed]
                    if trimmed:  # no longer in the stream: nothing left to store
                        self.client.xack(stream, INGEST_GROUP, *trimmed)
                    log.info("ingest: took over %d entries of gone %s", len(ids), name)
                    total += self.store({stream: messages})
        return total

    def store(self, entries: Entries) -> int:
        """Write the entries in one transaction; then acknowledge them and append their deltas."""
        return self.commit(self.prepare(entries))

    def prepare(self, entries: Entries) -> Round:
        """The entries' valid items (the rest logged and dropped) and their ids.

        Metric points come as `Points`: their columns are taken here, while the previous
        round is written, rather than on the commit thread.
        """
        round_ = Round()
        items: dict[str, list[Any]] = defaultdict(list)
        for stream, messages in entries.items():
            kind = self._kinds.get(stream, stream)  # items by kind, acknowledged by stream
            for entry_id, fields in messages:
                round_.ids[stream].append(entry_id)
                if fields:
                    items[kind].extend(self._parse(kind, fields))
        round_.items.update(items)
        if items[METRICS_STREAM]:
            round_.items[METRICS_STREAM] = Points.of(items[METRICS_STREAM])
        return round_

    def commit(self, round_: Round) -> int:
        """Write a round in one transaction; then acknowledge it and append its deltas."""
        return self.publish(self.write(round_))

    def write(self, round_: Round) -> Written:
        """Store a round's items in one transaction (committed on return)."""
        if not round_:
            return Written(ids=round_.ids)
        with self.db.session() as session:
            if self._wal is not None:
                self._wal.own(session.connection())
            deltas, progressed = write_batch(
                session, round_.items, log_lines_per_attempt=self.log_lines_per_attempt
            )
        return Written(ids=round_.ids, deltas=deltas, progressed=progressed)

    def publish(self, written: Written) -> int:
        """Acknowledge a committed round's entries and append its deltas (one MULTI/EXEC)."""
        if not written:
            return 0
        pipe = self.client.pipeline(transaction=True)
        for stream, entry_ids in written.ids.items():
            pipe.xack(stream, INGEST_GROUP, *entry_ids)
        # the deltas are plain dicts of validated values (metrics all finite): msgspec's
        # encoder writes them as pydantic-core's does, in half the time
        feed.append(pipe, written.deltas, encode=msgspec.json.encode, stream=self._live)
        pipe.execute()
        self._announce_progress(written.progressed)
        if self.on_progress is not None and written.progressed:
            try:
                self.on_progress(written.progressed)
            except Exception:  # a failed judgement is retried by the sweeps loop
                log.exception("ingest: the progress hook failed")
        return len(written)

    def _announce_progress(self, job_ids: set[int]) -> None:
        now = time.monotonic()
        due = {j for j in job_ids if now - self._announced.get(j, 0.0) >= PROGRESS_ANNOUNCE_SECONDS}
        for job_id in due:
            self._announced[job_id] = now
        announce_jobs(self.client, due)

    def _parse(self, stream: str, fields: dict[Any, Any]) -> list[dict[str, Any]]:
        """The valid items of one entry, as dicts; a malformed entry or item is logged, skipped."""
        raw = fields.get(BATCH_FIELD.encode()) or fields.get(BATCH_FIELD) or b""
        entry = decode_entry(stream, raw)
        if entry is None:
            return []
        self._count_drops(stream, entry.producer, entry.dropped)
        return entry.items

    def _count_drops(self, stream: str, producer: str, dropped: int) -> None:
        if dropped:
            self.dropped += dropped
            log.warning(
                "ingest: %s dropped %d items on %s while Redis was away", producer, dropped, stream
            )
