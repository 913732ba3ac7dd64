"""An attempt's start-up, phase by phase, as job events with their times (#33 item 6).

Between `running` and the first step a job page stayed blank for 12-23 s. The supervisor now
says what its ranks are doing: each phase below is one event of kind `startup:<phase>`,
published once, when every local rank has reached it (the first step: when one has), its
message saying how long the phase took and how long since the ranks were started.

- `startup:ranks`: the supervisor starts the rank processes;
- `startup:imported`: each rank's first message on its pipe: the interpreter runs and the
  engine has imported torch (a script: its first SDK call);
- `startup:rendezvous`: each rank finished torch.distributed's rendezvous (phase `build`);
- `startup:data`: each rank built its model, optimizer and data (phase `train`);
- `startup:first_step`: a rank reported its first step (SDK points or stdout metrics).

Phases come from what the ranks send anyway (`sdk.phase`, the hang watch's input), stamped
here: a rank can neither forge these events (the relay refuses their kinds) nor time them.
A later phase implies the earlier ones (a script that declares only `train`). With several
nodes, each node's supervisor reports its own ranks; the ingest keeps the first of each kind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from workers.contract.protocol import AttemptEvent
from workers.telemetry import StreamPublisher

PREFIX = "startup:"
RANKS = PREFIX + "ranks"
IMPORTED = PREFIX + "imported"
RENDEZVOUS = PREFIX + "rendezvous"
DATA = PREFIX + "data"
FIRST_STEP = PREFIX + "first_step"
#: the gang-wide milestones, in order; a rank's progress is an index into this
MILESTONES = (IMPORTED, RENDEZVOUS, DATA)
#: the phase a rank declares (sdk.phase) once it has passed each milestone
PHASE_REACHES = {"build": RENDEZVOUS, "train": DATA}


class StartupPhases:
    """Tracks the local ranks' start-up (fed by the relay threads) and publishes each phase once."""

    def __init__(
        self,
        events: StreamPublisher,
        *,
        attempt_id: int,
        node: str,
        ranks: Sequence[int],
        engine: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._events, self._attempt_id, self._node = events, attempt_id, node
        self._engine, self._clock = engine, clock
        self._lock = threading.Lock()
        #: rank -> how many MILESTONES it has passed
        self._passed = dict.fromkeys(ranks, 0)
        self._sent: set[str] = set()
        self._started_at = self._last_at = clock()

    def starting(self, devices: Sequence[int]) -> None:
        """The ranks are being started now (the clock of every later phase starts here)."""
        with self._lock:
            self._started_at = self._last_at = self._clock()
            count = len(self._passed)
            listed = ", ".join(map(str, devices))
            plural = "s" if count != 1 else ""
            self._send(RANKS, f"starting {count} rank{plural} on node {self._node} ({listed})")

    def message(self, rank: int) -> None:
        """A rank sent something on its pipe: its interpreter runs."""
        self._reach(rank, IMPORTED)

    def phase(self, rank: int, phase: str | None) -> None:
        """A rank declared the phase it is in."""
        reached = PHASE_REACHES.get(phase or "")
        if reached is not None:
            self._reach(rank, reached)

    def step(self, rank: int) -> None:
        """A rank reported a step: the first one ends the start-up."""
        with self._lock:
            if FIRST_STEP in self._sent:
                return
            if self._engine:  # a step of the gang needs every rank past each milestone
                for milestone in MILESTONES:  # (another rank's last phase may be in flight)
                    if milestone not in self._sent:
                        self._send(milestone, self._describe(milestone) + self._took())
            self._send(FIRST_STEP, f"rank {rank} reported its first step" + self._took())

    def _reach(self, rank: int, milestone: str) -> None:
        index = MILESTONES.index(milestone) + 1
        with self._lock:
            if rank not in self._passed or self._passed[rank] >= index:
                return
            self._passed[rank] = index
            everyone = min(self._passed.values())
            for reached in MILESTONES[:everyone]:
                if reached not in self._sent and FIRST_STEP not in self._sent:  # in order
                    self._send(reached, self._describe(reached) + self._took())

    def _describe(self, milestone: str) -> str:
        count = len(self._passed)
        ranks = f"all {count} ranks" if count > 1 else "the rank"
        if milestone == IMPORTED:
            started = "interpreter and torch imported" if self._engine else "script running"
            return f"{started} on {ranks} of node {self._node}"
        if milestone == RENDEZVOUS:
            return f"rendezvous done: {ranks} of node {self._node} joined the gang"
        return f"model, optimizer and data ready on {ranks} of node {self._node}"

    def _took(self) -> str:
        now = self._clock()
        took, since = now - self._last_at, now - self._started_at
        self._last_at = now
        return f" ({took:.1f} s; {since:.1f} s since the ranks started)"

    def _send(self, kind: str, message: str) -> None:
        self._sent.add(kind)
        event = AttemptEvent(
            attempt_id=self._attempt_id, kind=kind, message=message, step=None, time=time.time()
        )
        self._events.add(event)
