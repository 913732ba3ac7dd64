"""CLI verbs for sweeps: `trainboard sweep start|ls|show|cancel`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from backend.cli.base import app, connect, read_mapping

sweep_app = typer.Typer(no_args_is_help=True, help="Sweeps: a search over settings as trials.")
app.add_typer(sweep_app, name="sweep")
SweepId = Annotated[int, typer.Argument(min=1)]


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _show(sweep: dict[str, Any]) -> None:
    best = sweep["best"]
    typer.echo(
        f"sweep {sweep['id']} {sweep['state']}: {sweep['name']} "
        f"({len(sweep['trials'])} trials, {sweep['max_concurrency']} at once, "
        f"{sweep['mode']} {sweep['metric']})"
    )
    if best:
        typer.echo(
            f"best so far: trial {best['number']} (job {best['job_id']}) {_value(best['value'])}"
        )


@sweep_app.command("start")
def start(
    ctx: typer.Context,
    sweep_file: Annotated[Path, typer.Argument(help="sweep config, YAML or JSON (docs/sweeps.md)")],
) -> None:
    """Start a sweep from a file: its base spec, parameters, method, early stopping."""

    _show(connect(ctx).call("POST", "/api/sweeps", json=read_mapping(sweep_file, "a sweep")))


@sweep_app.command("ls")
def list_sweeps(ctx: typer.Context) -> None:
    """List sweeps, newest first."""
    sweeps = connect(ctx).call("GET", "/api/sweeps")["sweeps"]
    if not sweeps:
        typer.echo("no sweeps yet: start one with `trainboard sweep start sweep.yaml`")
    for sweep in sweeps:
        done = sum(
            t["state"] not in ("pending", "queued", "scheduled", "running") for t in sweep["trials"]
        )
        best = _value(sweep["best"]["value"]) if sweep["best"] else "-"
        typer.echo(
            f"{sweep['id']:>5}  {sweep['state']:<9} {done:>3}/{len(sweep['trials']):<3} "
            f"best {best:<10} {sweep['name']}"
        )


@sweep_app.command("show")
def show(ctx: typer.Context, sweep_id: SweepId) -> None:
    """The sweep's trials: setting, state, step, metric, why a stopped one was stopped."""
    sweep = connect(ctx).call("GET", f"/api/sweeps/{sweep_id}")
    _show(sweep)
    for trial in sweep["trials"]:
        setting = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in trial["setting"].items())
        job = trial["job_id"] or "-"
        typer.echo(
            f"#{trial['number']:<3} job {job!s:<6} {trial['state']:<10} step {trial['step']:<6} "
            f"{_value(trial['value']):<10} {setting}"
        )
        if trial["early_stop"]:
            typer.echo(f"      {trial['early_stop']}")


@sweep_app.command("cancel")
def cancel(ctx: typer.Context, sweep_id: SweepId) -> None:
    """Cancel a sweep: no more trials start, and its live trials are cancelled."""
    _show(connect(ctx).call("POST", f"/api/sweeps/{sweep_id}/cancel"))
