"""`trainboard backup DEST`: a consistent copy of the database while Trainboard runs.

The copy holds every secret Trainboard keeps (webhook signing keys, token and password
hashes), so it is made readable by its owner only: it is written inside a fresh 0700
directory next to DEST and then hard-linked to DEST, which fails, never overwrites and
never follows a link, when anything (a file, a planted symlink) is already there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import URL, make_url

from backend.cli.base import app, fail


@app.command()
def backup(
    dest: Annotated[Path, typer.Argument(help="the copy to write (must not exist)")],
) -> None:
    """Copy the database, consistently, while Trainboard runs (docs/operations.md)."""
    from backend.config import get_settings

    url = make_url(get_settings().db_url)
    if dest.exists() or dest.is_symlink():
        fail(f"{dest} exists: a backup never overwrites")
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        size = sqlite_backup(Path(url.database), dest)
        typer.echo(f"backed up {url.database} to {dest} ({size} bytes, integrity ok)")
        return
    postgres_backup(url, dest)
    typer.echo(f"backed up the PostgreSQL database to {dest} (restore with pg_restore)")


@contextlib.contextmanager
def private_copy(dest: Path) -> Iterator[Path]:
    """A path in a new 0700 directory beside dest; what is written there becomes dest, 0600."""
    scratch = Path(tempfile.mkdtemp(prefix=".trainboard-backup-", dir=dest.parent))
    try:
        copy = scratch / "copy"
        yield copy
        os.chmod(copy, 0o600)
        try:
            os.link(copy, dest)  # atomic; EEXIST for anything there, a dangling symlink too
        except FileExistsError:
            fail(f"{dest} exists: a backup never overwrites")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def sqlite_backup(source: Path, dest: Path) -> int:
    """SQLite's online backup of source into dest (0600), checked; its size in bytes."""
    if not source.is_file():
        fail(f"no database at {source}")
    with private_copy(dest) as copy:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        out = sqlite3.connect(copy)
        try:
            src.backup(out)  # page by page, restarting if a writer changes the source meanwhile
            (verdict,) = out.execute("PRAGMA integrity_check").fetchone()
        finally:
            src.close()
            out.close()
        if verdict != "ok":
            fail(f"the copy failed its integrity check ({verdict}); nothing kept")
    return dest.stat().st_size


def pg_dump_call(url: URL, file: Path) -> tuple[list[str], dict[str, str]]:
    """pg_dump's argv (no password in it) and the environment that carries the password."""
    # URL.set ignores None: _replace is how a password is taken out
    libpq = url._replace(drivername="postgresql", password=None).render_as_string(False)
    env = dict(os.environ)
    if url.password is not None:
        env["PGPASSWORD"] = str(url.password)  # the environment is readable by us only
    return ["pg_dump", "--format=custom", f"--file={file}", libpq], env


def postgres_backup(url: URL, dest: Path) -> None:
    """pg_dump into dest (0600), its password passed in the environment, never in argv."""
    if shutil.which("pg_dump") is None:
        command, _ = pg_dump_call(url, dest)
        fail("pg_dump is not installed here; run, where it is: " + " ".join(command[:3]) + " URL")
    with private_copy(dest) as copy:
        command, env = pg_dump_call(url, copy)
        if subprocess.run(command, env=env, umask=0o077).returncode != 0:
            fail("pg_dump failed (see above)")
