"""Starts the rank processes of one attempt, watches them, stops them on request, reports why."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from workers.contract import entrypoints, run_layout
from workers.contract.protocol import AttemptOrder, AttemptOutcome
from workers.contract.rank_env import (
    EXIT_EXPLAINED,
    EXIT_FINAL,
    EXIT_PAUSE,
    EXIT_PLATFORM,
    RankEnv,
    failure_file,
    signal_file,
)
from workers.devices.registry import DeviceRegistry, Occupant
from workers.supervisor import run_dirs, seed
from workers.supervisor.attempt_streams import AttemptStreams, ControlKey
from workers.supervisor.containment import Containment
from workers.supervisor.disk import LogLossNotice, disk_full, paused_for_disk
from workers.supervisor.hang_watch import HangWatch, flag_hang
from workers.supervisor.oom_kills import OomKills
from workers.supervisor.oom_kills import describe as describe_oom_kill
from workers.supervisor.outcome import attempt_outcome
from workers.supervisor.rank_group import RankGroup
from workers.supervisor.rank_launch import free_port, local_rank_envs, rank_command, start_rank
from workers.supervisor.relay import TelemetryRelay
from workers.supervisor.run_dir_quota import RunDirQuota
from workers.supervisor.settings import SupervisorSettings
from workers.supervisor.startup import StartupPhases
from workers.supervisor.stdout_metrics import StdoutMetrics, metric_sink
from workers.telemetry import StreamPublisher

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
#: how long an attempt's end waits for its provenance step to finish (it runs up to 60 s a
#: command): a short job would otherwise end it before its interpreter report is in
STEPS_WAIT_SECONDS = 60.0


class Supervisor:
    """Runs one attempt's local ranks in one process group; no rank outlives `run()`."""

    def __init__(
        self,
        order: AttemptOrder,
        settings: SupervisorSettings,
        *,
        publisher: StreamPublisher | None = None,
        registry: DeviceRegistry | None = None,
        use_gpus: bool = False,
        lease: Callable[[], bool] = lambda: True,
    ) -> None:
        self.order, self.settings, self.use_gpus = order, settings, use_gpus
        # a gang on this node alone takes a port free here now: on a busy host the
        # scheduler's fixed 29500 + id collides with other Trainboards' and torchrun jobs
        self.master_port = free_port() if order.nnodes == 1 else order.master_port
        self.registry = registry or DeviceRegistry()
        self.streams = AttemptStreams(order, settings.redis_url, logs=publisher)
        self._shutdown = threading.Event()
        self._control = ControlKey(order, settings.redis_url, shutdown=self._shutdown)
        self.identity = settings.isolation.identity(
            order.job_id, deployment=order.deployment, data_dir=settings.data_dir
        )
        #: every process of the attempt, however it detaches: ended with it (see _cleanup)
        self.containment = Containment.create(
            f"a{order.attempt_id}", self.identity, exclusive_uid=settings.isolation.per_job
        )
        self.run_dir = run_layout.attempt_dir(settings.data_dir, order.job_id, order.number)
        # per attempt: a fenced attempt that trains on can never touch its successor's files
        self.checkpoint_dir = run_layout.checkpoint_dir(
            settings.data_dir, order.job_id, order.number
        )
        self.dirs: run_dirs.AttemptDirs | None = None
        self._relays: list[TelemetryRelay] = []
        self._log_loss = LogLossNotice(
            self.streams.events, attempt_id=order.attempt_id, node=order.node
        )
        self.ranks = RankGroup()
        self._stop_reason: str | None = None
        self._fenced: str | None = None
        #: whether this node still holds its lease with the control plane (see heartbeat)
        self._lease = lease
        self._platform_fault = False  # a rank exited EXIT_PLATFORM (its rendezvous failed)
        self._pause = False  # a rank exited EXIT_PAUSE (its checkpoint found a full disk)
        self._platform_stop = True  # see shutdown()
        self._platform_reason: str | None = None  # see shutdown()
        self._quota: RunDirQuota | None = None
        self._oom: OomKills | None = None  # counted once the ranks start
        self._hangs = HangWatch(
            (env.rank for env in self.rank_envs()), timeout=order.spec.health.hang_timeout_s
        )
        #: the start-up's phases as job events (ranks starting ... first step)
        self.startup = StartupPhases(
            self.streams.events,
            attempt_id=order.attempt_id,
            node=order.node,
            ranks=[env.rank for env in self.rank_envs()],
            engine=order.spec.entrypoint is None,
        )

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The rank processes started so far, in local rank order."""
        return self.ranks.processes

    def _retain(self) -> None:
        """Keep the newest `keep_last` checkpoints of this attempt, only while we own it.

        Retention is the supervisor's, not the ranks': a node that lost its lease (declared
        lost, maybe restarted elsewhere from one of these) deletes nothing.
        """
        if self._fenced is None and self._lease() and self.dirs is not None:
            keep = self.order.spec.checkpoint.keep_last
            run_dirs.prune_steps(self.dirs.checkpoints, keep_last=keep)

    def fence(self, reason: str) -> None:
        """Kill the ranks now: this node no longer owns the attempt (no checkpoint, no grace)."""
        self._fenced = reason
        self._shutdown.set()
        self.ranks.signal(signal.SIGKILL)
        self.containment.signal(signal.SIGKILL)

    def shutdown(self, *, platform_stop: bool = True, reason: str | None = None) -> None:
        """Stop the ranks because this node agent is going away (a final checkpoint first).

        A platform stop (the default: a node agent stopping) is reported as a platform
        fault, which spends no restart of the job's; otherwise it counts as a failure.
        `reason` says why the platform stops it when it is not the node shutting down, or,
        for a stop that counts as a failure, why it was stopped (Slurm's time limit).
        """
        self._platform_stop = platform_stop
        self._platform_reason = reason
        self._shutdown.set()

    def refuse(self, reason: str) -> AttemptOutcome:
        """The outcome of an attempt that was claimed but never started."""
        self.containment.end()  # its provenance step may have started something
        self._close_connections()
        return AttemptOutcome(outcome="failed", reason=reason)

    def run(self) -> AttemptOutcome:
        """Start every local rank, supervise them to the end, and say how the attempt ended."""
        try:
            self._start()
            failed = self._watch()
        except entrypoints.EntrypointRefused as err:
            failed = str(err)
        except Exception as err:
            log.exception("attempt %d: supervisor error", self.order.attempt_id)
            failed = f"supervisor error: {type(err).__name__}: {err}"
            if (full := disk_full(err, self.settings.data_dir)) is not None:
                # the node's disk, not the job: restarted without spending max_restarts
                self._platform_fault = True
                failed = f"node {self.order.node}: {full}; {failed}"
        finally:
            self._cleanup()
        return self._outcome(failed)

    def rank_envs(self) -> list[RankEnv]:
        """The environment of each local rank, exactly as torchrun would set it."""
        return local_rank_envs(
            self.order,
            master_port=self.master_port,
            run_dir=self.run_dir,
            checkpoint_dir=self.checkpoint_dir,
            use_gpus=self.use_gpus,
        )

    def _metric_sink(self, rank: int) -> Callable[[str], None] | None:
        """What turns a rank's stdout lines into metric points (entrypoint jobs only)."""
        publisher = self.streams.stdout_metrics
        if publisher is None:
            return None
        parser = StdoutMetrics(self.settings.metric_patterns, self.settings.metric_step_pattern)

        def on_step(step: int) -> None:
            self._hangs.steps(rank, (step,))
            self.startup.step(rank)

        return metric_sink(
            parser, publisher, attempt_id=self.order.attempt_id, rank=rank, on_step=on_step
        )

    def _start(self) -> None:
        ranks = [env.rank for env in self.rank_envs()]
        self.dirs = dirs = run_dirs.prepare_attempt(
            self.settings.data_dir, self.order, self.identity, ranks
        )
        self._quota = RunDirQuota(
            dirs.job,
            limit=self.settings.run_dir_quota_bytes,
            interval=self.settings.run_dir_quota_interval,
        )
        self._quota.start()
        # a clone from another job's checkpoint resumes from this job's own copy of it
        self.order = seed.adopt(self.order, self.settings.data_dir, self.identity)
        entry = self.order.spec.entrypoint
        argv, python_paths, cwd = rank_command(
            entry, script_roots=self.settings.script_roots, run_dir=self.run_dir
        )
        if entry is not None:
            self.streams.open_stdout_metrics()
        # its use counts while it lives, whatever it started (a daemon in its own session too)
        self.registry.track(self.order.attempt_id, self.containment.pids)
        # the kernel's OOM kills counted from here, where the ranks will live (see _failure)
        self._oom = OomKills.watch()
        if self.containment.cgroup is not None:
            self._oom.add(self.containment.cgroup)
        self.startup.starting(self.order.devices)
        for env, slot in zip(self.rank_envs(), self.order.devices, strict=True):
            read_fd, write_fd = os.pipe()
            try:
                process = start_rank(
                    argv,
                    cwd=cwd,
                    rank_vars=RankEnv(**{**env.__dict__, "telemetry_fd": write_fd}).to_env(),
                    spec_env=self.order.spec.env,
                    python_paths=python_paths,
                    dirs=dirs,
                    identity=self.identity,
                    interface=self.settings.interface,
                    telemetry_fd=write_fd,
                    process_group=self.ranks.pgid,
                    containment=self.containment,
                )
            finally:
                os.close(write_fd)  # the rank holds the only writing end now
            self.ranks.add(process)
            self._relays.append(
                TelemetryRelay(
                    read_fd,
                    attempt_id=self.order.attempt_id,
                    rank=env.rank,
                    metrics=self.streams.metrics,
                    events=self.streams.events,
                    checkpoint_dir=dirs.checkpoints,
                    on_checkpoint=self._retain,
                    watch=self._hangs,
                    startup=self.startup,
                )
            )
            self.registry.assign(slot, Occupant(self.order.attempt_id, env.rank, process.pid))
            self.ranks.forward_output(
                process,
                attempt_id=self.order.attempt_id,
                rank=env.rank,
                logs=dirs.logs,
                publisher=self.streams.logs,
                on_stdout_line=self._metric_sink(env.rank),
                on_write_error=self._log_loss,
            )
        log.info(
            "attempt %d: started %d ranks as %s in %s",
            self.order.attempt_id,
            len(self.processes),
            self.identity.name,
            self.containment.mechanism,
        )

    def _watch(self) -> str | None:
        """Poll ranks and the control key until all ranks exit; return a failure, if any."""
        kill_at: float | None = None
        while True:
            if self._fenced is not None:
                self.ranks.signal(signal.SIGKILL)  # not ours any more: no grace, no checkpoint
            codes = self.ranks.codes()
            bad = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
            if bad is not None and self._stop_reason is None:
                self.ranks.kill()  # the gang cannot go on without one of its ranks
                return self._failure(bad)
            if all(code is not None for code in codes):
                if self._stop_reason is None:
                    # a stop that came as they exited (a SIGTERM straight to the ranks, as
                    # Slurm's scancel sends, then the request): they stopped for it, they did
                    # not finish; an operator's scancel read "succeeded" before
                    self._stop_reason = self._control.request()
                if self._stop_reason is None:
                    return self._outside_stop()
                return None
            if self._quota is not None and self._quota.over is not None:
                self.ranks.kill()  # the disk is filling: no grace, no final checkpoint
                return self._quota.over
            if self._stop_reason is None:
                self._stop_reason = self._control.request()
                if self._stop_reason is not None:
                    log.info("attempt %d: %s requested", self.order.attempt_id, self._stop_reason)
                    self.ranks.signal(signal.SIGTERM)
                    self.containment.signal(signal.SIGTERM)  # what left the group, too
                    kill_at = time.monotonic() + self.settings.grace_for(self._stop_reason)
            elif kill_at is not None and time.monotonic() >= kill_at:
                log.warning("attempt %d: ranks ignored SIGTERM; killing", self.order.attempt_id)
                self.ranks.signal(signal.SIGKILL)
                kill_at = None
            if self._stop_reason is None and (hung := self._check_hang(codes)) is not None:
                self.ranks.kill()  # on_hang restart: a hung rank honours no SIGTERM
                return hung
            time.sleep(POLL_SECONDS)

    def _outside_stop(self) -> str | None:
        """Why ranks that all exited 0 did not finish, or None: they did. A rank that got a
        SIGTERM the supervisor did not send (Slurm's time limit and an operator's kill signal
        the ranks themselves) saves, exits 0 and leaves a mark; its cause may still be on its
        way (the node agent's own signal, a stop request): waited for, then read."""
        marked = [
            env.rank
            for env in self.rank_envs()
            if run_dirs.read_job_file(signal_file(self.run_dir, env.rank), self.identity)
        ]
        if not marked:
            return None
        log.info("attempt %d: ranks %s stopped on a SIGTERM", self.order.attempt_id, marked)
        deadline = time.monotonic() + self.settings.outside_stop_wait_seconds
        while (request := self._control.request()) is None and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        if request is not None:
            self._stop_reason = request
            return None
        ranks = ", ".join(map(str, marked))
        return (
            f"rank {ranks} stopped on a SIGTERM that Trainboard did not send (an operator, the "
            "system or the cluster manager) before the attempt finished"
        )

    def _check_hang(self, codes: list[int | None]) -> str | None:
        """Flag a hang once (event, stacks); with on_hang restart, the reason to end for."""
        ranks = {env.rank: p.pid for env, p in zip(self.rank_envs(), self.processes, strict=False)}
        return flag_hang(
            self._hangs,
            ranks=ranks,
            codes=codes,
            attempt_id=self.order.attempt_id,
            events=self.streams.events,
            restart=self.order.spec.health.on_hang == "restart",
            logs=self.dirs.logs if self.dirs is not None else None,
        )

    def _failure(self, index: int) -> str:
        code = self.processes[index].returncode
        if code in (EXIT_EXPLAINED, EXIT_PLATFORM, EXIT_PAUSE, EXIT_FINAL):  # the engine wrote why
            rank = self.rank_envs()[index].rank
            reason = run_dirs.read_job_file(failure_file(self.run_dir, rank), self.identity)
            self._platform_fault = code == EXIT_PLATFORM
            self._pause = code == EXIT_PAUSE
            if reason is not None:
                return f"node {self.order.node}: {reason}" if self._platform_fault else reason
        if code == -signal.SIGKILL and self._oom is not None and (where := self._oom.since()):
            return describe_oom_kill(self.rank_envs()[index].rank, where)
        return self.ranks.exit_reason(index)

    def _cleanup(self) -> None:
        """Kill whatever is left of the attempt (no orphan survives), drain output, free slots."""
        self.ranks.kill()
        # what left the group (setsid) now; its provenance step once done (time-limited)
        self.containment.end_after_steps(wait=STEPS_WAIT_SECONDS)
        if self._quota is not None:
            self._quota.stop()
        self.ranks.drain()
        for relay in self._relays:
            relay.join(timeout=5.0)
        for slot, process in zip(self.order.devices, self.processes, strict=False):
            self.registry.release(slot, process.pid)
        self.registry.untrack(self.order.attempt_id)
        self._close_connections()

    def _close_connections(self) -> None:
        self.streams.close()
        self._control.close()

    def _outcome(self, failed: str | None) -> AttemptOutcome:
        outcome = attempt_outcome(
            failed=failed,
            stop_reason=self._stop_reason,
            fenced=self._fenced,
            platform_fault=self._platform_fault,
            platform_stop=self._platform_stop,
            platform_reason=self._platform_reason,
            codes=self.ranks.exit_codes(),
            checkpoint_dir=self.checkpoint_dir,
        )
        if self._pause and self._fenced is None and self._stop_reason is None:
            return paused_for_disk(outcome, node=self.order.node, data_dir=self.settings.data_dir)
        return outcome
