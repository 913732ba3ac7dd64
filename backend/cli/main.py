"""The `trainboard` command: run the stack, run a worker, and drive jobs from a terminal."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from backend.cli.base import JobId, app, connect, fail, read_mapping


@app.command()
def up(
    host: Annotated[str | None, typer.Option(help="bind address [TRAINBOARD_HOST]")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="[TRAINBOARD_PORT]")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="[TRAINBOARD_DATA_DIR]")] = None,
    cpu_slots: Annotated[
        int | None, typer.Option(min=1, max=1024, help="[TRAINBOARD_CPU_SLOTS]")
    ] = None,
    executor: Annotated[
        str | None, typer.Option(help="nodes or slurm (docs/slurm.md) [TRAINBOARD_EXECUTOR]")
    ] = None,
) -> None:
    """Run everything on this machine: database, Redis, API, scheduler and one worker."""
    from backend.config import Settings
    from backend.launcher import up as launch

    given = {"host": host, "port": port, "data_dir": data_dir, "executor": executor}
    overrides = {k: v for k, v in given.items() if v}
    settings = Settings(**overrides)  # type: ignore[arg-type]
    slots = cpu_slots or settings.cpu_slots or max(1, os.cpu_count() or 1)
    raise typer.Exit(launch(settings, cpu_slots=slots))


@app.command()
def worker(
    node_name: Annotated[str | None, typer.Option(help="[TRAINBOARD_NODE_NAME]")] = None,
    cpu_slots: Annotated[
        int | None, typer.Option(min=1, max=1024, help="[TRAINBOARD_CPU_SLOTS]")
    ] = None,
) -> None:
    """Run a node agent that joins a running Trainboard (needs TRAINBOARD_NODE_TOKEN)."""
    from workers.node.agent import run_node_agent
    from workers.node.settings import WorkerSettings

    overrides: dict[str, Any] = {}
    if node_name:
        overrides["node_name"] = node_name
    if cpu_slots:
        overrides["cpu_slots"] = cpu_slots
    settings = WorkerSettings(**overrides)
    if not settings.node_token:
        fail("a worker needs a node token: set TRAINBOARD_NODE_TOKEN")
    raise typer.Exit(run_node_agent(settings))


@app.command()
def ingest() -> None:
    """Run the telemetry ingest and its loops apart from the API (`trainboard up` starts it)."""
    from backend.config import get_settings
    from backend.ingest_process import run_ingest_process

    raise typer.Exit(run_ingest_process(get_settings()))


@app.command()
def migrate() -> None:
    """Bring the database schema up to date (alembic upgrade head)."""
    from backend.config import get_settings
    from backend.migrate import upgrade

    upgrade(get_settings().db_url)
    typer.echo("database is up to date")


@app.command()
def submit(
    ctx: typer.Context,
    spec_file: Annotated[Path, typer.Argument(help="job spec, YAML or JSON")],
) -> None:
    """Submit a job from a spec file."""
    spec = read_mapping(spec_file, "a job spec")
    job = connect(ctx).call("POST", "/api/jobs", json=spec)
    typer.echo(f"job {job['id']} {job['state']}: {job['name']}")


@app.command("ls")
def list_jobs(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option(help="only jobs in this state")] = None,
) -> None:
    """List jobs, newest first."""
    params = {"state": state} if state else {}
    jobs = connect(ctx).call("GET", "/api/jobs", params=params)["jobs"]
    if not jobs:
        typer.echo("no jobs yet: submit one with `trainboard submit spec.yaml`")
        return
    typer.echo(f"{'ID':>5}  {'STATE':<11} {'STEP':>13}  {'DEVICES':<10} NAME")
    for job in jobs:
        step = f"{job['step']}/{job['total_steps'] or '?'}"
        devices = ",".join(map(str, job["devices"])) or "-"
        line = f"{job['id']:>5}  {job['state']:<11} {step:>13}  {devices:<10} {job['name']}"
        if job["state"] == "queued" and job.get("queue_position"):
            line += f"  [#{job['queue_position']} in queue: {job['wait_reason'] or 'placing'}]"
        elif job["state"] == "scheduled" and job.get("wait_reason"):
            line += f"  [{job['wait_reason']}]"  # held by the executor: Slurm's pending reason
        typer.echo(line)


@app.command()
def cancel(ctx: typer.Context, job_id: JobId) -> None:
    """Cancel a job (a running one saves a checkpoint first)."""
    job = connect(ctx).call("POST", f"/api/jobs/{job_id}/cancel")
    typer.echo(f"job {job['id']} {job['state']}")


# commands defined in sibling modules register themselves on `app` when imported (after
# this module's, so that `--help` lists them in this order)
from backend.cli import admin as _admin  # noqa: E402, F401
from backend.cli import backup as _backup  # noqa: E402, F401
from backend.cli import jobs as _jobs  # noqa: E402, F401
from backend.cli import sweeps as _sweeps  # noqa: E402, F401
from backend.cli import usage as _usage  # noqa: E402, F401
