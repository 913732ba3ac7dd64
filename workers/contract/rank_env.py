"""A rank's environment: torchrun's variables plus Trainboard's own (never a credential)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: the variable naming the telemetry pipe's file descriptor
TELEMETRY_FD_VARIABLE = "TRAINBOARD_TELEMETRY_FD"
#: exit status of a rank that wrote its reason to `failure_file` (the supervisor reports it as is)
EXIT_EXPLAINED = 3
#: like EXIT_EXPLAINED, for a platform fault (a rendezvous that could not complete): the
#: attempt's restart does not spend the job's max_restarts
EXIT_PLATFORM = 4
#: like EXIT_EXPLAINED, for a job its own policy pauses (`checkpoint.on_disk_full: pause`):
#: the job becomes paused with the reason, resumable, no restart spent
EXIT_PAUSE = 5
#: like EXIT_EXPLAINED, for a failure no restart can fix (a checkpoint refused for what it
#: holds): the job fails at once with the reason, spending no restart
EXIT_FINAL = 6


def failure_file(run_dir: Path, rank: int) -> Path:
    """Where a rank writes why it gave up, for the supervisor to report."""
    return run_dir / f"rank-{rank}.failure"


def signal_file(run_dir: Path, rank: int) -> Path:
    """Where a rank marks that a SIGTERM reached it: a rank that stops on one exits 0, as a
    finished one does, and its supervisor must not read "succeeded" into a stop it did not
    ask for (Slurm's time limit or an operator's kill signal the ranks themselves)."""
    return run_dir / f"rank-{rank}.sigterm"


@dataclass(frozen=True)
class RankEnv:
    """Everything a rank learns from its environment; written by the supervisor, read by ranks."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    group_rank: int
    master_addr: str
    master_port: int
    run_id: str
    attempt_id: int
    job_id: int
    spec_file: Path
    run_dir: Path
    checkpoint_dir: Path
    #: the inherited pipe this rank writes its telemetry to (its supervisor reads the other end)
    telemetry_fd: int | None = None
    resume_from: Path | None = None
    cuda_visible_devices: str | None = None

    def to_env(self) -> dict[str, str]:
        """The variables to set, exactly as torchrun would plus TRAINBOARD_*."""
        env = {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "GROUP_RANK": str(self.group_rank),
            "ROLE_RANK": str(self.rank),
            "ROLE_WORLD_SIZE": str(self.world_size),
            "GROUP_WORLD_SIZE": str(self.world_size // self.local_world_size),
            "ROLE_NAME": "default",
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "TORCHELASTIC_RUN_ID": self.run_id,
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0",
            # rank 0 hosts the store at MASTER_PORT, as with torchrun's static rendezvous
            "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            "OMP_NUM_THREADS": "1",
            "TRAINBOARD_ATTEMPT_ID": str(self.attempt_id),
            "TRAINBOARD_JOB_ID": str(self.job_id),
            "TRAINBOARD_SPEC_FILE": str(self.spec_file),
            "TRAINBOARD_RUN_DIR": str(self.run_dir),
            "TRAINBOARD_CHECKPOINT_DIR": str(self.checkpoint_dir),
            "TRAINBOARD_RESUME_FROM": str(self.resume_from) if self.resume_from else "",
        }
        if self.telemetry_fd is not None:
            env[TELEMETRY_FD_VARIABLE] = str(self.telemetry_fd)
        if self.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.cuda_visible_devices
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RankEnv | None:
        """Read the variables back; None outside a Trainboard attempt."""
        env = os.environ if environ is None else environ
        if not env.get("TRAINBOARD_ATTEMPT_ID"):
            return None
        resume = env.get("TRAINBOARD_RESUME_FROM") or None
        return cls(
            rank=int(env.get("RANK", "0")),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            world_size=int(env.get("WORLD_SIZE", "1")),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", "1")),
            group_rank=int(env.get("GROUP_RANK", "0")),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=int(env.get("MASTER_PORT", "29500")),
            run_id=env.get("TORCHELASTIC_RUN_ID", "none"),
            attempt_id=int(env["TRAINBOARD_ATTEMPT_ID"]),
            job_id=int(env.get("TRAINBOARD_JOB_ID", "0")),
            spec_file=Path(env.get("TRAINBOARD_SPEC_FILE", "spec.json")),
            run_dir=Path(env.get("TRAINBOARD_RUN_DIR", ".")),
            checkpoint_dir=Path(env.get("TRAINBOARD_CHECKPOINT_DIR", "checkpoints")),
            telemetry_fd=_int_or_none(env.get(TELEMETRY_FD_VARIABLE)),
            resume_from=Path(resume) if resume else None,
            cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        )


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None
