"""The worker's own configuration, read once from TRAINBOARD_* environment variables."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from workers.contract.run_layout import job_dir
from workers.supervisor.job_user import Isolation, prepare_isolation, same_user
from workers.supervisor.settings import SupervisorSettings
from workers.supervisor.stdout_metrics import DEFAULT_PATTERNS, DEFAULT_STEP_PATTERN


class WorkerSettings(BaseSettings):
    """Settings of one node agent (`trainboard worker`)."""

    model_config = SettingsConfigDict(env_prefix="TRAINBOARD_", extra="ignore")

    redis_url: str = Field(
        "",
        description="the control plane's Redis with its credentials (redis://:PASSWORD@HOST/0) "
        "or a unix socket only the service user reaches; a Redis that answers without "
        "credentials is refused (workers/node/redis_access.py)",
    )
    api_url: str = "http://127.0.0.1:8000"
    node_name: str = Field(default_factory=socket.gethostname)
    node_token: str = ""
    cpu_slots: int | None = Field(None, ge=1, le=1024)
    data_dir: Path = Path(".trainboard")
    sample_interval: float = Field(1.0, ge=0.1)
    heartbeat_interval: float = Field(2.0, gt=0)
    stop_grace_seconds: float = Field(10.0, ge=0)
    preempt_grace_seconds: float = Field(
        60.0, ge=0, description="a preempted job's final checkpoint must finish in this time"
    )
    address: str = Field(
        "derived",
        max_length=255,
        description="the address peers reach this node on; 'derived': the source address of "
        "this host's route to the API",
    )
    interface: str = Field(
        "", max_length=64, description="the interface ranks talk over (default: the address's)"
    )
    script_roots: str = Field(
        "scripts", description="colon-separated directories user entrypoints resolve under"
    )
    metric_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PATTERNS),
        description="regexes with groups name and value: stdout numbers that become metrics",
    )
    metric_step_pattern: str = Field(
        DEFAULT_STEP_PATTERN, description="regex with group step: where a line states its step"
    )

    job_user: str = Field(
        "trainboard-job",
        description="the unprivileged account ranks run as when the worker runs as root",
    )
    job_uid_base: int = Field(
        1_900_000_000,
        ge=0,
        le=2**31 - 2,
        description="job uids are leased from base up in uid_registry (0: every job as the job "
        "user's own uid)",
    )
    allow_same_user: bool = Field(
        False, description="run ranks as the worker's own user when it cannot switch (unsafe)"
    )
    uid_registry: Path = Field(
        Path("/var/lib/trainboard/uids"),
        description="the host-wide directory job uids are leased from (root's, 0700), shared "
        "by every Trainboard on this host so no two jobs get one uid",
    )
    run_dir_quota_bytes: int = Field(
        20 << 30,
        ge=0,
        description="bytes a job's run directory may hold on this node; over it the attempt "
        "fails with 'run dir over quota (X of Y)' (0: no quota)",
    )
    run_dir_quota_interval: float = Field(
        5.0, gt=0, description="seconds between two measures of a running job's run directory"
    )

    def prepare_isolation(self) -> Isolation:
        """Set up the job user these settings name (IsolationError says why it cannot)."""
        return prepare_isolation(
            account=self.job_user,
            uid_base=self.job_uid_base,
            allow_same_user=self.allow_same_user,
            runs_dir=job_dir(self.data_dir, 0).parent,
            uid_registry=self.uid_registry,
        )

    def for_supervisor(
        self, isolation: Isolation | None = None, *, interface: str | None = None
    ) -> SupervisorSettings:
        """The settings each attempt's supervisor gets (it never reads these itself)."""
        return SupervisorSettings(
            redis_url=self.redis_url,
            data_dir=self.data_dir,
            script_roots=self.script_root_paths,
            stop_grace_seconds=self.stop_grace_seconds,
            preempt_grace_seconds=self.preempt_grace_seconds,
            metric_patterns=self.metric_patterns,
            metric_step_pattern=self.metric_step_pattern,
            isolation=isolation or same_user(),
            interface=interface,
            run_dir_quota_bytes=self.run_dir_quota_bytes,
            run_dir_quota_interval=self.run_dir_quota_interval,
        )

    @property
    def script_root_paths(self) -> list[Path]:
        """The entrypoint roots, resolved (the same rule as the API's)."""
        return [Path(p).resolve() for p in self.script_roots.split(":") if p]

    @property
    def slots(self) -> int:
        """CPU slots this node offers when it has no GPU."""
        return self.cpu_slots or os.cpu_count() or 1
