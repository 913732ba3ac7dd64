"""What a supervisor is told by its node agent (it never reads the node's settings itself)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workers.supervisor.job_user import Isolation, same_user
from workers.supervisor.stdout_metrics import DEFAULT_PATTERNS, DEFAULT_STEP_PATTERN


@dataclass(frozen=True)
class SupervisorSettings:
    """Per-node settings every attempt's supervisor runs with."""

    redis_url: str
    data_dir: Path
    script_roots: list[Path]
    stop_grace_seconds: float = 10.0
    #: a preempted attempt's ranks get this long for their final checkpoint, then SIGKILL
    preempt_grace_seconds: float = 60.0
    #: ranks that stopped on a SIGTERM the supervisor did not send wait this long for its
    #: cause (a stop request, or the node agent's own signal: a Slurm step asks the controller
    #: up to 15 s why); none by then: the attempt fails, it did not finish
    outside_stop_wait_seconds: float = 20.0
    metric_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_PATTERNS))
    metric_step_pattern: str = DEFAULT_STEP_PATTERN
    isolation: Isolation = field(default_factory=same_user)
    #: the node's advertised interface: gloo (and NCCL's sockets) are pinned to it
    interface: str | None = None
    #: bytes a job's run directory may hold on this node (0: no quota), measured this often
    run_dir_quota_bytes: int = 20 << 30
    run_dir_quota_interval: float = 5.0

    def grace_for(self, request: str) -> float:
        """Seconds between SIGTERM and SIGKILL for a stop request (preempt: a final checkpoint)."""
        return self.preempt_grace_seconds if request == "preempt" else self.stop_grace_seconds
