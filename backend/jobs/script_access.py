"""Whether a job's ranks can open its entrypoint: refused at submit, naming what blocks it.

Ranks never run as the API's user when it is root: a root worker starts them as an
unprivileged job user (a uid of the job's own), for whom a script's directory and file are
"other users'". A script in a directory without o+x (or a 0600 script) resolves here, yet
failed in the rank with Python's "can't open file ... Permission denied" (#33 item 13).
When the API is not root, its worker runs ranks as that same user, who is asked directly.

Only the part under the script root is checked: it is the submitter's, and is named
relative to the root (the roots themselves stay unnamed, as in `entrypoints.resolve`). The
root and the directories above it are the operator's; a worker refuses to start when its
job user cannot reach its data dir, and the NOTES say how to open a root.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from workers.contract.entrypoints import EntrypointRefused, Launch
from workers.contract.spec import Entrypoint


def checked(entry: Entrypoint, launch: Launch) -> Launch:
    """The launch, once its files are readable by the job's ranks; else EntrypointRefused."""
    problem = job_user_problem(entry, launch)
    if problem is not None:
        raise EntrypointRefused(problem)
    return launch


def job_user_problem(
    entry: Entrypoint, launch: Launch, *, as_other: bool | None = None
) -> str | None:
    """Why the job user cannot open the entrypoint's files under its root, or None.

    `as_other`: judge by the permission bits for other users (the default when this process
    is root, which may open anything), else ask the OS as this process's user.
    """
    other = os.geteuid() == 0 if as_other is None else as_other
    root = launch.root
    if entry.script is not None:
        target, listed = Path(launch.argv[1]), False
        what = f"script {entry.script!r}"
    else:
        assert entry.module is not None
        base = root.joinpath(*entry.module.split("."))
        target = next(p for p in (base.with_suffix(".py"), base / "__main__.py") if p.is_file())
        # the import system lists each directory on the way (os.listdir): it needs r as well
        listed, what = True, f"module {entry.module}"
    relative = target.resolve().relative_to(root)
    directories = [root / part for part in _prefixes(relative.parent)]
    if listed:
        directories.insert(0, root)
    for directory in directories:
        if not _allowed(directory, read=listed, search=True, other=other):
            need = "rx" if listed else "x"
            name = directory.relative_to(root).as_posix() or "."
            return (
                f"{what} cannot be opened by the job's ranks: directory {name + '/'!r} under "
                f"the script root is not {'readable and ' if listed else ''}traversable by "
                f"other users (mode {_mode(directory)}); ranks run as an unprivileged job "
                f"user, not as the files' owner. Fix: chmod o+{need} {name!r} (every directory "
                f"down to the {'module' if listed else 'script'} needs o+{need}, the file o+r)"
            )
    if not _allowed(target, read=True, search=False, other=other):
        name = relative.as_posix()
        return (
            f"{what} cannot be opened by the job's ranks: {name!r} under the script root is "
            f"not readable by other users (mode {_mode(target)}); ranks run as an "
            f"unprivileged job user, not as the file's owner. Fix: chmod o+r {name!r}"
        )
    return None


def _prefixes(relative: Path) -> list[Path]:
    """a/b/c → [a, a/b, a/b/c]; '.' → []."""
    parts = relative.parts
    return [Path(*parts[: i + 1]) for i in range(len(parts))]


def _allowed(path: Path, *, read: bool, search: bool, other: bool) -> bool:
    if not other:
        mode = (os.R_OK if read else 0) | (os.X_OK if search else 0)
        return os.access(path, mode)
    bits = stat.S_IMODE(path.stat().st_mode)
    return (not read or bool(bits & stat.S_IROTH)) and (not search or bool(bits & stat.S_IXOTH))


def _mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"
