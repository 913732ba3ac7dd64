"""A thread that keeps this node's lease with the control plane, and fences it when lost.

Every beat lists the attempts this node runs; the reply names those it no longer owns
(ended, or claimed by another incarnation), which are killed before anything else. A node
that has not heard back for the lease (the control plane's heartbeat timeout) kills every
attempt it runs itself: by then the control plane has declared it lost and restarted them
elsewhere, so they must not train on beside their replacements.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from workers.contract.protocol import Heartbeat as Beat
from workers.devices.host import disk_space, host_stats
from workers.node.api_client import ApiError, NodeApiClient

log = logging.getLogger(__name__)


class Fence:
    """What the heartbeat may do to running attempts (the node's ActiveAttempts)."""

    def __init__(
        self,
        running: Callable[[], Iterable[int]],
        kill: Callable[[Iterable[int], str], None],
        kill_all: Callable[[str], None],
    ) -> None:
        self.running, self.kill, self.kill_all = running, kill, kill_all


class Heartbeat:
    """Posts a heartbeat, with the machine's CPU and memory, every `interval` seconds."""

    def __init__(
        self,
        api: NodeApiClient,
        node: str,
        interval: float,
        reregister: Callable[[], object],
        fence: Fence,
        *,
        deployment_seen: Callable[[], bool | None] = lambda: None,
        data_dir: Path | None = None,
    ) -> None:
        self._api, self._node, self._interval = api, node, interval
        self._reregister, self._fence = reregister, fence
        self._deployment_seen = deployment_seen
        self._data_dir = data_dir
        self._stop = threading.Event()
        self.drained = False
        #: seconds without an answer after which this node fences itself (from the replies)
        self.lease: float | None = None
        #: when the newest answered beat was sent: the control plane counted us alive then
        self._answered_beat_sent = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        """Start beating in the background."""
        self._answered_beat_sent = time.monotonic()
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop beating."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.beat()

    def lease_valid(self) -> bool:
        """Whether the control plane still counts this node alive (as far as we know)."""
        lease = self.lease
        if lease is None:
            return True
        return time.monotonic() - self._answered_beat_sent < self._fence_after(lease)

    def _fence_after(self, lease: float) -> float:
        return max(lease / 2, lease - 2 * self._interval)

    def beat(self) -> None:
        """One heartbeat and what follows from its answer (or from its silence)."""
        assert self._api.instance is not None
        running = sorted(self._fence.running())
        beat = Beat(
            instance=self._api.instance,
            attempts=running,
            deployment_seen=self._deployment_seen(),
            host=host_stats(),
            disk=disk_space(self._data_dir) if self._data_dir is not None else None,
        )
        # the lease runs from when this beat was sent, not from when its answer is read: an
        # answer that waited (this process frozen, a slow network) says only that the
        # control plane counted us alive back then
        sent = time.monotonic()
        try:
            reply = self._api.heartbeat(self._node, beat, retry_for=self._interval)
        except ApiError as err:
            silent = time.monotonic() - self._answered_beat_sent
            # a margin of two beats: the control plane counts from when it last heard us
            if self.lease is not None and running and silent > self._fence_after(self.lease):
                # plain words: the job page shows this as the job's reason (#33)
                why = (
                    f"Trainboard's API did not answer this node for {silent:.0f} s, so the node "
                    "stopped the job's ranks (the job may have been placed elsewhere meanwhile: "
                    "stopping keeps it from running twice)"
                )
                log.error("%s; killing attempts %s", why, running)
                self._fence.kill_all(why)
            log.warning("heartbeat failed (%s); registering again", err)
            try:
                self._reregister()
            except ApiError as again:
                log.warning("registration failed: %s", again)
            return
        if reply.stop:  # before anything else: these attempts are no longer ours
            log.warning("attempts %s are not this node's any more: killing them", reply.stop)
            self._fence.kill(
                reply.stop,
                "Trainboard had ended this attempt on this node, so the node stopped its ranks",
            )
        # only then is the lease renewed: a supervisor that was cut off (or frozen) must not
        # see a valid lease, and prune checkpoints, before it knows its attempt was ended
        self._answered_beat_sent = sent
        self.lease = reply.lease_seconds
        if reply.reregister:
            log.warning("node %s is not registered as this worker: registering again", self._node)
            try:
                self._reregister()
            except ApiError as err:
                log.warning("registration failed: %s", err)
        if reply.drained != self.drained:
            state = "drained" if reply.drained else "accepting work"
            log.info("node %s is %s", self._node, state)
            self.drained = reply.drained
