"""The API's settings as the tests run it: one admin token, no scheduler loop, no frontend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.config import Settings

ADMIN_TOKEN = "tb_test-admin-token-0123456789"


def api_settings(
    tmp: Path,
    *,
    database_url: str,
    redis_url: str,
    scripts: bool = False,
    hosts: str = "testserver",
    **overrides: Any,
) -> Settings:
    """An API on that database and Redis, its data under tmp (and a script root, if asked)."""
    if scripts:
        (tmp / "scripts").mkdir(exist_ok=True)
        overrides["script_roots"] = str(tmp / "scripts")
    return Settings(
        data_dir=tmp / "data",
        database_url=database_url,
        redis_url=redis_url,
        admin_token=ADMIN_TOKEN,
        run_scheduler=False,
        frontend_dir=tmp / "no-frontend",
        allowed_hosts=hosts,
        **overrides,
    )
