"""`trainboard backup DEST`: a consistent copy of the database while Trainboard runs."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import make_url

from backend.cli.base import app, fail


@app.command()
def backup(
    dest: Annotated[Path, typer.Argument(help="the copy to write (must not exist)")],
) -> None:
    """Copy the database, consistently, while Trainboard runs (docs/operations.md)."""
    from backend.config import get_settings

    url = make_url(get_settings().db_url)
    if dest.exists():
        fail(f"{dest} exists: a backup never overwrites")
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        size = sqlite_backup(Path(url.database), dest)
        typer.echo(f"backed up {url.database} to {dest} ({size} bytes, integrity ok)")
        return
    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    command = ["pg_dump", "--format=custom", f"--file={dest}", libpq]
    if shutil.which("pg_dump") is None:
        fail("pg_dump is not installed here; run, where it is: " + " ".join(command[:3]) + " URL")
    if subprocess.run(command).returncode != 0:
        fail("pg_dump failed (see above)")
    typer.echo(f"backed up the PostgreSQL database to {dest} (restore with pg_restore)")


def sqlite_backup(source: Path, dest: Path) -> int:
    """SQLite's online backup of source into dest, checked; its size in bytes."""
    if not source.is_file():
        fail(f"no database at {source}")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    out = sqlite3.connect(dest)
    try:
        src.backup(out)  # page by page, restarting if a writer changes the source meanwhile
        (verdict,) = out.execute("PRAGMA integrity_check").fetchone()
    finally:
        src.close()
        out.close()
    if verdict != "ok":
        dest.unlink()
        fail(f"the copy failed its integrity check ({verdict}); nothing kept")
    return dest.stat().st_size
