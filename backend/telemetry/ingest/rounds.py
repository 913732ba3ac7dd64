"""An ingest round: the entries read together, validated, written in one transaction.

While one round commits (on a thread of its own), the next is read and validated;
rounds still commit, are acknowledged and go live in the order they were read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from backend.telemetry.ingest.writer import Delta


@dataclass
class Round:
    """Validated items of the entries read in one round, and those entries' ids."""

    items: dict[str, Sequence[Any]] = field(default_factory=lambda: defaultdict(list))
    ids: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))

    def __len__(self) -> int:
        return sum(len(v) for v in self.ids.values())


@dataclass
class Written:
    """A committed round, still to be acknowledged and published: its ids and deltas."""

    ids: dict[str, list[Any]]
    deltas: list[Delta] = field(default_factory=list)
    progressed: set[int] = field(default_factory=set)

    def __len__(self) -> int:
        return sum(len(v) for v in self.ids.values())


class CommitPipeline:
    """Writes rounds one at a time, in order, on a thread of its own.

    While a round's rows go to the database (the server's work, the GIL released), the
    caller reads and validates the next round, and acknowledges and publishes the round
    committed before. Only one round is in flight, so rounds commit, are acknowledged and
    go live in the order they were read. Unthreaded (SQLite, whose work runs in this
    process under the GIL), each round is written and published as it is submitted.
    """

    def __init__(
        self,
        write: Callable[[Round], Written],
        publish: Callable[[Written], int],
        *,
        threaded: bool = True,
    ) -> None:
        self._write = write
        self._publish = publish
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ingest-commit")
        self._threaded = threaded
        self._inflight: Future[Written] | None = None

    def submit(self, round_: Round) -> None:
        """Start writing this round once the one in flight committed (its error is raised
        here), then acknowledge and publish that one while this one is written."""
        if not self._threaded:
            self._publish(self._write(round_))
            return
        inflight, self._inflight = self._inflight, None
        committed = inflight.result() if inflight is not None else None
        if round_:
            self._inflight = self._thread.submit(self._write, round_)
        if committed is not None:
            self._publish(committed)

    def wait(self) -> int:
        """Wait for the round in flight and publish it; the entries it stored."""
        inflight, self._inflight = self._inflight, None
        return self._publish(inflight.result()) if inflight is not None else 0

    def __enter__(self) -> CommitPipeline:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if kind is None:
                self.wait()
            elif self._inflight is not None:
                self._inflight.exception()  # unpublished: its entries stay pending
        finally:
            self._thread.shutdown(wait=True)
