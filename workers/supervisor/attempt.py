"""Starts the rank processes of one attempt, watches them, stops them on request, reports why."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from time import time as now

import redis

from workers.contract import entrypoints, run_layout
from workers.contract.keys import Keys
from workers.contract.protocol import (
    EVENTS_STREAM,
    LOGS_STREAM,
    METRICS_STREAM,
    AttemptOrder,
    AttemptOutcome,
    MetricPoint,
)
from workers.contract.rank_env import (
    EXIT_EXPLAINED,
    EXIT_PAUSE,
    EXIT_PLATFORM,
    RankEnv,
    failure_file,
)
from workers.devices.registry import DeviceRegistry, Occupant
from workers.supervisor import run_dirs, seed
from workers.supervisor.disk_notice import LogLossNotice, free_mib
from workers.supervisor.disk_pause import paused_for_disk
from workers.supervisor.hang_watch import HangWatch, flag_hang
from workers.supervisor.outcome import attempt_outcome
from workers.supervisor.rank_launch import free_port, start_rank
from workers.supervisor.rank_output import OutputForwarder
from workers.supervisor.relay import TelemetryRelay
from workers.supervisor.settings import SupervisorSettings
from workers.supervisor.stdout_metrics import StdoutMetrics
from workers.telemetry import StreamPublisher, producer_name

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
#: after asking hung ranks for their stacks, how long they get to write them before a kill
STOP_REQUESTS = ("cancel", "pause", "preempt")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


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
        self.keys = Keys(order.deployment)  # this deployment's names in Redis
        # a gang on this node alone takes a port free here now: on a busy host the
        # scheduler's fixed 29500 + id collides with other Trainboards' and torchrun jobs
        self.master_port = free_port() if order.nnodes == 1 else order.master_port
        self.registry = registry or DeviceRegistry()
        self._own_publisher = publisher is None
        self.publisher = publisher or StreamPublisher(
            settings.redis_url,
            self.keys.stream(LOGS_STREAM),
            producer_name(order.node, f"attempt-{order.attempt_id}"),
        )
        self.identity = settings.isolation.identity(order.job_id)
        self.run_dir = run_layout.attempt_dir(settings.data_dir, order.job_id, order.number)
        # per attempt: a fenced attempt that trains on can never touch its successor's files
        self.checkpoint_dir = run_layout.checkpoint_dir(
            settings.data_dir, order.job_id, order.number
        )
        self.dirs: run_dirs.AttemptDirs | None = None
        self._relays: list[TelemetryRelay] = []
        self._metrics = StreamPublisher(
            settings.redis_url,
            self.keys.stream(METRICS_STREAM),
            producer_name(order.node, f"attempt-{order.attempt_id}-metrics"),
        )
        self._events = StreamPublisher(
            settings.redis_url,
            self.keys.stream(EVENTS_STREAM),
            producer_name(order.node, f"attempt-{order.attempt_id}-events"),
        )
        self._log_loss = LogLossNotice(self._events, attempt_id=order.attempt_id, node=order.node)
        self.processes: list[subprocess.Popen[bytes]] = []
        self._forwarders: list[OutputForwarder] = []
        self._stderr: list[OutputForwarder] = []
        self._pgid: int | None = None
        self._stop_reason: str | None = None
        self._shutdown = threading.Event()
        self._fenced: str | None = None
        #: whether this node still holds its lease with the control plane (see heartbeat)
        self._lease = lease
        self._platform_fault = False  # a rank exited EXIT_PLATFORM (its rendezvous failed)
        self._pause = False  # a rank exited EXIT_PAUSE (its checkpoint found a full disk)
        self._redis = redis.Redis.from_url(settings.redis_url, socket_timeout=2.0)
        #: metric points parsed from a user program's stdout (entrypoint jobs only)
        self._stdout_metrics: StreamPublisher | None = None
        self._hangs = HangWatch(
            (env.rank for env in self.rank_envs()), timeout=order.spec.health.hang_timeout_s
        )

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
        self._signal(signal.SIGKILL)

    def shutdown(self) -> None:
        """Stop the ranks because this node agent is going away (the attempt counts as failed)."""
        self._shutdown.set()

    def refuse(self, reason: str) -> AttemptOutcome:
        """The outcome of an attempt that was claimed but never started."""
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
            if isinstance(err, OSError) and err.errno == errno.ENOSPC:
                # the node's disk, not the job: restarted without spending max_restarts
                self._platform_fault = True
                full = f"no space left on device ({free_mib(self.settings.data_dir)} MiB free)"
                failed = f"node {self.order.node}: {full}; {failed}"
        finally:
            self._cleanup()
        return self._outcome(failed)

    def rank_envs(self) -> list[RankEnv]:
        """The environment of each local rank, exactly as torchrun would set it."""
        order, local = self.order, len(self.order.devices)
        visible = ",".join(map(str, order.devices)) if self.use_gpus else None
        resume = Path(order.resume_from) if order.resume_from else None
        return [
            RankEnv(
                rank=order.node_rank * local + i,
                local_rank=i,
                world_size=order.nnodes * local,
                local_world_size=local,
                group_rank=order.node_rank,
                master_addr=order.master_addr,
                master_port=self.master_port,
                run_id=f"trainboard-job{order.job_id}-attempt{order.attempt_id}",
                attempt_id=order.attempt_id,
                job_id=order.job_id,
                spec_file=(self.run_dir / "spec.json").resolve(),
                run_dir=self.run_dir.resolve(),
                checkpoint_dir=self.checkpoint_dir.resolve(),
                resume_from=resume,
                cuda_visible_devices=visible,
            )
            for i in range(local)
        ]

    def _command(self) -> tuple[list[str], list[str], Path | None]:
        """argv, PYTHONPATH entries to prepend and working directory of every rank."""
        entry = self.order.spec.entrypoint
        if entry is None:
            return [sys.executable, "-m", "workers.rank.engine"], [], None
        # resolved again here: the API's check ran on another machine, maybe long ago
        launch = entrypoints.resolve(entry, self.settings.script_roots)
        self._stdout_metrics = StreamPublisher(
            self.settings.redis_url,
            self.keys.stream(METRICS_STREAM),
            producer_name(self.order.node, f"attempt-{self.order.attempt_id}-stdout"),
        )
        return launch.argv, [str(launch.root)], self.run_dir

    def _metric_sink(self, rank: int) -> Callable[[str], None] | None:
        """What turns a rank's stdout lines into metric points (entrypoint jobs only)."""
        publisher = self._stdout_metrics
        if publisher is None:
            return None
        parser = StdoutMetrics(self.settings.metric_patterns, self.settings.metric_step_pattern)
        attempt = self.order.attempt_id

        def sink(line: str) -> None:
            for step, name, value in parser.parse(line):
                point = MetricPoint(
                    attempt_id=attempt, rank=rank, step=step, name=name, value=value, time=now()
                )
                publisher.add(point)
                self._hangs.steps(rank, (step,))

        return sink

    def _start(self) -> None:
        self.dirs = dirs = run_dirs.prepare(
            self.settings.data_dir, self.order.job_id, self.order.number, self.identity
        )
        run_dirs.write_file(dirs.run, "spec.json", self.order.spec.model_dump_json(indent=2))
        # earlier attempts' checkpoints go, except the one this attempt resumes from
        keep = {dirs.checkpoints.name}
        if self.order.resume_from:
            keep.add(Path(self.order.resume_from).parent.name)
        run_dirs.prune_checkpoints(dirs.checkpoints.parent, keep=keep)
        # a clone from another job's checkpoint resumes from this job's own copy of it
        self.order = seed.adopt(self.order, self.settings.data_dir, self.identity)
        for rank in self.rank_envs():
            run_dirs.remove_file(dirs.run, failure_file(dirs.run, rank.rank).name)
        argv, paths, cwd = self._command()
        python_paths = [*paths, _PACKAGE_ROOT]
        for env, slot in zip(self.rank_envs(), self.order.devices, strict=True):
            read_fd, write_fd = os.pipe()
            try:
                process = self._spawn(argv, cwd, env, python_paths, write_fd)
            finally:
                os.close(write_fd)  # the rank holds the only writing end now
            self._relays.append(
                TelemetryRelay(
                    read_fd,
                    attempt_id=self.order.attempt_id,
                    rank=env.rank,
                    metrics=self._metrics,
                    events=self._events,
                    checkpoint_dir=dirs.checkpoints,
                    on_checkpoint=self._retain,
                    watch=self._hangs,
                )
            )
            self.registry.assign(slot, Occupant(self.order.attempt_id, env.rank, process.pid))
            self._forward_output(process, env.rank, dirs.logs)
        log.info(
            "attempt %d: started %d ranks as %s",
            self.order.attempt_id,
            len(self.processes),
            self.identity.name,
        )

    def _spawn(
        self, argv: list[str], cwd: Path | None, env: RankEnv, python_paths: list[str], fd: int
    ) -> subprocess.Popen[bytes]:
        """Start one rank as the job's user, with an allow-listed environment and its pipe."""
        assert self.dirs is not None
        process = start_rank(
            argv,
            cwd=cwd,
            rank_vars=RankEnv(**{**env.__dict__, "telemetry_fd": fd}).to_env(),
            spec_env=self.order.spec.env,
            python_paths=python_paths,
            dirs=self.dirs,
            identity=self.identity,
            interface=self.settings.interface,
            telemetry_fd=fd,
            process_group=self._pgid,
        )
        if self._pgid is None:
            self._pgid = process.pid  # the first rank leads the attempt's process group
        self.processes.append(process)
        return process

    def _forward_output(self, process: subprocess.Popen[bytes], rank: int, logs: Path) -> None:
        for stream, pipe in (("stdout", process.stdout), ("stderr", process.stderr)):
            assert pipe is not None
            forwarder = OutputForwarder(
                pipe,
                attempt_id=self.order.attempt_id,
                rank=rank,
                stream=stream,  # type: ignore[arg-type]
                log_file=logs / f"rank-{rank}.{stream}.log",
                publisher=self.publisher,
                on_line=self._metric_sink(rank) if stream == "stdout" else None,
                on_write_error=self._log_loss,
            )
            self._forwarders.append(forwarder)
            if stream == "stderr":
                self._stderr.append(forwarder)

    def _watch(self) -> str | None:
        """Poll ranks and the control key until all ranks exit; return a failure, if any."""
        kill_at: float | None = None
        while True:
            if self._fenced is not None:
                self._signal(signal.SIGKILL)  # not ours any more: no grace, no checkpoint
            codes = [p.poll() for p in self.processes]
            bad = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
            if bad is not None and self._stop_reason is None:
                self._signal(signal.SIGKILL)  # the gang cannot go on without one of its ranks
                for p in self.processes:
                    p.wait()
                return self._failure(bad)
            if all(code is not None for code in codes):
                return None
            if self._stop_reason is None:
                self._stop_reason = self._stop_request()
                if self._stop_reason is not None:
                    log.info("attempt %d: %s requested", self.order.attempt_id, self._stop_reason)
                    self._signal(signal.SIGTERM)
                    kill_at = time.monotonic() + (
                        self.settings.preempt_grace_seconds  # a longer final checkpoint
                        if self._stop_reason == "preempt"
                        else self.settings.stop_grace_seconds
                    )
            elif kill_at is not None and time.monotonic() >= kill_at:
                log.warning("attempt %d: ranks ignored SIGTERM; killing", self.order.attempt_id)
                self._signal(signal.SIGKILL)
                kill_at = None
            if self._stop_reason is None and (hung := self._check_hang(codes)) is not None:
                self._signal(signal.SIGKILL)  # on_hang restart: a hung rank honours no SIGTERM
                for p in self.processes:
                    p.wait()
                return hung
            time.sleep(POLL_SECONDS)

    def _check_hang(self, codes: list[int | None]) -> str | None:
        """Flag a hang once (event, stacks); with on_hang restart, the reason to end for."""
        ranks = {env.rank: p.pid for env, p in zip(self.rank_envs(), self.processes, strict=False)}
        return flag_hang(
            self._hangs,
            ranks=ranks,
            codes=codes,
            attempt_id=self.order.attempt_id,
            events=self._events,
            restart=self.order.spec.health.on_hang == "restart",
        )

    def _stop_request(self) -> str | None:
        if self._shutdown.is_set():
            return "shutdown"
        try:
            value = self._redis.get(self.keys.control(self.order.attempt_id))
        except redis.RedisError as err:
            log.warning("attempt %d: cannot read control key: %s", self.order.attempt_id, err)
            return None
        request = value.decode() if isinstance(value, bytes) else value
        return request if request in STOP_REQUESTS else None

    def _failure(self, index: int) -> str:
        code = self.processes[index].returncode
        if code in (EXIT_EXPLAINED, EXIT_PLATFORM, EXIT_PAUSE):  # the engine wrote why
            rank = self.rank_envs()[index].rank
            reason = run_dirs.read_job_file(failure_file(self.run_dir, rank), self.identity)
            self._platform_fault = code == EXIT_PLATFORM
            self._pause = code == EXIT_PAUSE
            if reason is not None:
                return f"node {self.order.node}: {reason}" if self._platform_fault else reason
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        self._stderr[index].join(timeout=2.0)
        tail = "\n".join(self._stderr[index].tail)
        return f"rank {index} {how}" + (f"; last stderr lines:\n{tail}" if tail else "")

    def _signal(self, signum: int) -> None:
        if self._pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._pgid, signum)

    def _cleanup(self) -> None:
        """Kill whatever is left of the group (no orphan survives), drain output, free slots."""
        self._signal(signal.SIGKILL)
        for process in self.processes:
            process.wait()
        for forwarder in self._forwarders:
            forwarder.join(timeout=5.0)
        for relay in self._relays:
            relay.join(timeout=5.0)
        for slot, process in zip(self.order.devices, self.processes, strict=False):
            self.registry.release(slot, process.pid)
        self._close_connections()

    def _close_connections(self) -> None:
        if self._own_publisher:
            self.publisher.close()
        self._metrics.close()
        self._events.close()
        if self._stdout_metrics is not None:
            self._stdout_metrics.close()
        self._redis.close()

    def _outcome(self, failed: str | None) -> AttemptOutcome:
        outcome = attempt_outcome(
            failed=failed,
            stop_reason=self._stop_reason,
            fenced=self._fenced,
            platform_fault=self._platform_fault,
            codes=[p.returncode for p in self.processes if p.returncode is not None],
            checkpoint_dir=self.checkpoint_dir,
        )
        if self._pause and self._fenced is None and self._stop_reason is None:
            return paused_for_disk(outcome, node=self.order.node, data_dir=self.settings.data_dir)
        return outcome
