"""CLI verbs that control jobs and nodes beyond submit/ls/cancel."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from backend.cli.base import JobId, app, connect


def _show(job: dict[str, Any]) -> None:
    typer.echo(f"job {job['id']} {job['state']}: {job['name']}")


@app.command()
def pause(ctx: typer.Context, job_id: JobId) -> None:
    """Pause a job: its ranks save a checkpoint and stop; resume it later."""
    _show(connect(ctx).call("POST", f"/api/jobs/{job_id}/pause"))


@app.command()
def resume(
    ctx: typer.Context,
    job_id: JobId,
    devices: Annotated[
        int | None, typer.Option(min=1, max=1024, help="resume on a new gang size")
    ] = None,
) -> None:
    """Resume a paused, cancelled or failed job from its newest checkpoint."""
    body = {"devices": devices} if devices else None
    _show(connect(ctx).call("POST", f"/api/jobs/{job_id}/resume", json=body))


@app.command()
def clone(
    ctx: typer.Context,
    job_id: JobId,
    changes: Annotated[
        str,
        typer.Option(
            "--set", help='JSON merged over the spec, e.g. \'{"hyperparameters": {"lr": 0.1}}\''
        ),
    ] = "{}",
) -> None:
    """Submit a copy of a job with changes merged over its spec."""
    try:
        body = json.loads(changes)
    except ValueError as err:
        typer.echo(f"--set is not valid JSON: {err}", err=True)
        raise typer.Exit(2) from None
    if not isinstance(body, dict):
        typer.echo("--set must be a JSON object", err=True)
        raise typer.Exit(2)
    _show(connect(ctx).call("POST", f"/api/jobs/{job_id}/clone", json=body))


@app.command()
def attempts(ctx: typer.Context, job_id: JobId) -> None:
    """List a job's attempts: where each ran and how it ended."""
    rows = connect(ctx).call("GET", f"/api/jobs/{job_id}/attempts")
    for row in rows:
        where = f"{row['node']:<16} {row['devices']}"
        if row.get("slurm_job_id"):  # the Slurm executor's: the job Slurm knows it by
            where += f" (Slurm job {row['slurm_job_id']})"
        typer.echo(f"#{row['number']:<3} {row['state']:<10} {where}  {row['exit_reason'] or ''}")


@app.command()
def nodes(ctx: typer.Context) -> None:
    """List nodes, their state and devices."""
    for node in connect(ctx).call("GET", "/api/nodes")["nodes"]:
        busy = sum(d["job_id"] is not None for d in node["devices"])
        drained = " (drained)" if node["drained"] else ""
        typer.echo(
            f"{node['name']:<16} {node['state']:<5} {busy}/{len(node['devices'])} busy{drained}"
        )


@app.command()
def drain(ctx: typer.Context, name: str) -> None:
    """Admin: stop placing new jobs on a node (running ones finish)."""
    node = connect(ctx).call("POST", f"/api/nodes/{name}/drain")
    typer.echo(f"node {node['name']} drained")


@app.command()
def undrain(ctx: typer.Context, name: str) -> None:
    """Admin: accept new jobs on a node again."""
    node = connect(ctx).call("POST", f"/api/nodes/{name}/undrain")
    typer.echo(f"node {node['name']} accepts jobs")
