"""CLI verbs for shared clusters: `trainboard usage` and `trainboard limits` (through the API)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from backend.cli.base import app, connect, fail

FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]


def hours(seconds: float) -> str:
    return f"{seconds / 3600:,.2f}"


@app.command()
def usage(
    ctx: typer.Context,
    by: Annotated[str, typer.Option(help="user, job or node")] = "user",
    start: Annotated[
        datetime | None,
        typer.Option(
            "--from",
            formats=FORMATS,
            help="UTC; default: 7 days before --to",
        ),
    ] = None,
    end: Annotated[
        datetime | None,
        typer.Option("--to", formats=FORMATS, help="UTC; default: now"),
    ] = None,
) -> None:
    """Device-hours allocated and actually busy, per user, job or node (yours unless admin)."""
    if by not in ("user", "job", "node"):
        fail("--by must be user, job or node")
    params: dict[str, Any] = {"by": by}
    if start is not None:
        params["from"] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    if end is not None:
        params["to"] = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    report = connect(ctx).call("GET", "/api/usage", params=params)
    typer.echo(f"usage from {report['from']} to {report['to']} (device-hours)")
    typer.echo(f"{by.upper():<20} {'ALLOCATED':>12} {'BUSY':>12} {'BUSY %':>7} {'ATTEMPTS':>9}")
    for row in [*report["rows"], report["total"]]:
        allocated, busy = row["allocated_device_seconds"], row["busy_device_seconds"]
        share = f"{100 * busy / allocated:.0f}" if allocated else "-"
        typer.echo(
            f"{row['key']:<20} {hours(allocated):>12} {hours(busy):>12} {share:>7} "
            f"{row['attempts']:>9}"
        )


@app.command()
def limits(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Argument(help="the user to change (omit: list all)")] = None,
    share: Annotated[float | None, typer.Option(help="fair-share weight (default 1)")] = None,
    max_devices: Annotated[
        int | None, typer.Option(help="devices in use at once (-1: no quota)")
    ] = None,
    max_device_hours: Annotated[
        float | None, typer.Option(help="device-hours per rolling 7 days (-1: no quota)")
    ] = None,
) -> None:
    """Admins: users' fair-share weights and quotas; with options, change one user's."""
    client = connect(ctx)
    if user is not None:
        body: dict[str, Any] = {}
        if share is not None:
            body["share"] = share
        if max_devices is not None:
            body["max_devices"] = None if max_devices < 0 else max_devices
        if max_device_hours is not None:
            body["max_device_hours"] = None if max_device_hours < 0 else max_device_hours
        if not body:
            fail("give --share, --max-devices or --max-device-hours to change")
        client.call("PATCH", f"/api/users/{user}/limits", json=body)
    rows = client.call("GET", "/api/users/limits")
    typer.echo(
        f"{'USER':<20} {'SHARE':>6} {'MAX DEV':>8} {'MAX DEV-H/7D':>13} "
        f"{'IN USE':>7} {'DEV-H/7D':>9}"
    )
    for row in rows:
        if user is not None and row["user"] != user:
            continue
        cap = "-" if row["max_devices"] is None else str(row["max_devices"])
        budget = "-" if row["max_device_hours"] is None else f"{row['max_device_hours']:g}"
        typer.echo(
            f"{row['user']:<20} {row['share']:>6g} {cap:>8} {budget:>13} "
            f"{row['devices_in_use']:>7} {row['device_hours_7d']:>9.2f}"
        )
