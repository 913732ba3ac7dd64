"""All configuration, read once from TRAINBOARD_* environment variables."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Settings(BaseSettings):
    """Control-plane settings; every field is TRAINBOARD_<NAME> in the environment."""

    model_config = SettingsConfigDict(env_prefix="TRAINBOARD_", extra="ignore")

    host: str = Field("127.0.0.1", description="address the API binds to")
    port: int = Field(8000, ge=1, le=65535)
    data_dir: Path = Field(Path(".trainboard"), description="database, runs and checkpoints")
    database_url: str | None = Field(None, description="default: SQLite file in data_dir")
    redis_url: str = Field(
        "private",
        description="'private': `trainboard up` starts a Redis of its own on a unix socket; "
        "else the control plane's Redis with its credentials (redis://:PASSWORD@HOST/0): "
        "`up` and `worker` refuse one that answers without them",
    )
    admin_token: str | None = Field(None, description="bootstrap admin token; random if unset")
    cpu_slots: int | None = Field(
        None, ge=1, le=1024, description="devices a GPU-less worker offers"
    )
    script_roots: str = Field(
        "scripts", description="colon-separated directories user entrypoints resolve under"
    )
    auto_migrate: bool = Field(True, description="run `alembic upgrade head` at start")
    run_scheduler: bool = Field(True, description="run the scheduler loop in this process")
    run_ingest: bool = Field(True, description="run the telemetry ingest in this process")
    scheduler_interval: float = Field(0.5, gt=0, le=60)
    heartbeat_timeout: float = Field(15.0, gt=0, description="seconds before a node is lost")
    disk_low_bytes: int = Field(
        1 << 30,
        ge=0,
        description="a node with less free space in its data dir than the smaller of this and "
        "disk_low_fraction of that disk is 'disk low': it stays up but gets no new work",
    )
    disk_low_fraction: float = Field(0.05, ge=0, le=1, description="see disk_low_bytes")
    executor: Literal["nodes", "slurm"] = Field(
        "nodes",
        description="how attempts run: 'nodes', Trainboard's own worker nodes "
        "(`trainboard worker`, backend.executors.nodes); 'slurm', one Slurm job per attempt "
        "(backend.executors.slurm, docs/slurm.md)",
    )
    slurm_partition: str | None = Field(
        None, description="the Slurm partition jobs go to (default: the cluster's default)"
    )
    slurm_gpus: bool | None = Field(
        None,
        description="ask Slurm for GPUs (--gres=gpu:N), not CPUs, per device; unset: GPUs "
        "when the partition's nodes have any (their Gres/CfgTRES)",
    )
    slurm_api_url: str | None = Field(
        None,
        description="where supervisors on Slurm's nodes reach the API (default: http://host:port)",
    )
    claim_timeout: float = Field(
        60.0, gt=0, description="seconds before an unclaimed attempt is withdrawn and requeued"
    )
    min_run_seconds: float = Field(
        300.0, ge=0, description="a job preempted less than this long ago is not preempted again"
    )
    fair_share_half_life_hours: float = Field(
        168.0, gt=0, description="recent device usage halves in fair-share weight this often"
    )
    session_days: float = Field(7.0, gt=0)
    cookie_secure: bool = Field(False, description="mark the session cookie Secure (TLS)")
    frontend_dir: Path = Field(Path(__file__).resolve().parent.parent / "frontend" / "dist")
    series_cache_points: int = Field(
        5_000_000, ge=0, description="raw metric points the series cache holds (~24 bytes each)"
    )
    curve_rollup_grace_seconds: float = Field(
        30.0,
        ge=0,
        description="a job's curves are rolled up this long after its last attempt finished",
    )
    device_raw_retention_hours: float = Field(
        24.0, gt=0, description="raw device samples older than this are rolled up, then deleted"
    )
    device_rollup_seconds: int = Field(60, ge=1, le=3600, description="width of a rollup bucket")
    log_lines_per_attempt: int = Field(
        100_000,
        ge=100,
        description="log lines kept per attempt; beyond it the oldest are deleted and counted",
    )
    metrics_token: str | None = Field(
        None, description="bearer token a Prometheus scraper may use for /metrics (else: admin)"
    )
    allowed_hosts: str = Field(
        "127.0.0.1,localhost",
        description="comma-separated Host names answered, besides localhost, the bind host and "
        "IP literals; '*' answers any (turns DNS-rebinding protection off)",
    )
    cors_origins: str = Field("", description="comma-separated origins CORS admits; empty: closed")
    behind_proxy: bool = Field(
        False, description="a TLS-terminating proxy fronts the API (no public-address warning)"
    )
    max_body_bytes: int = Field(1 << 20, ge=1024, description="larger request bodies get 413")
    max_json_depth: int = Field(32, ge=2, le=1000, description="deeper JSON bodies get 422")
    login_rate_limit: int = Field(10, ge=1, description="logins per rate window per address")
    submit_rate_limit: int = Field(30, ge=1, description="submissions per rate window per token")
    token_rate_limit: int = Field(10, ge=1, description="tokens minted per rate window per user")
    webhook_rate_limit: int = Field(
        10, ge=1, description="webhooks created per rate window per user"
    )
    rate_window_seconds: int = Field(60, ge=1, le=86400)
    webhook_allowed_hosts: str = Field(
        "",
        description="comma-separated host names, IPs or CIDRs webhooks may reach, whatever "
        "their addresses; `*` or nothing listed: any public address too. Loopback, private, "
        "link-local, multicast and reserved addresses are refused unless listed (docs/health.md)",
    )
    trusted_proxies: str = Field(
        "",
        description="comma-separated proxy IPs/CIDRs whose X-Forwarded-For is believed; "
        "empty: the header is ignored and the peer address counts",
    )

    @field_validator("admin_token")
    @classmethod
    def _admin_token_is_strong(cls, value: str | None) -> str | None:
        if value is not None and len(value) < 16:
            raise ValueError("TRAINBOARD_ADMIN_TOKEN must be at least 16 characters")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_networks(cls, value: str) -> str:
        for item in _items(value):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                message = f"TRAINBOARD_TRUSTED_PROXIES: {item!r} is not an IP or CIDR"
                raise ValueError(message) from None
        return value

    @property
    def trusted_proxy_networks(self) -> tuple[IPNetwork, ...]:
        """The proxies whose X-Forwarded-For entries are believed."""
        return tuple(ipaddress.ip_network(i, strict=False) for i in _items(self.trusted_proxies))

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'trainboard.db').resolve()}"

    @property
    def allowed_host_set(self) -> frozenset[str]:
        """Host names the API answers to (lowercase, without port)."""
        names = {h.strip().lower().strip("[]") for h in self.allowed_hosts.split(",")}
        names |= {"localhost", self.host.lower().strip("[]")}
        return frozenset(n for n in names if n)

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip().lower().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]

    @property
    def script_root_paths(self) -> list[Path]:
        return [Path(p).resolve() for p in self.script_roots.split(":") if p]


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
