"""User entrypoints: resolve a script or module under the allowed roots, refusing any escape."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workers.contract.spec import Entrypoint


class EntrypointRefused(ValueError):
    """The entrypoint does not resolve to a file inside an allowed root."""


@dataclass(frozen=True)
class Launch:
    """How to start one rank of a user program."""

    argv: list[str]
    root: Path


def _inside(candidate: Path, root: Path) -> Path | None:
    """The candidate's real path (symlinks followed) if it is a file inside root, else None."""
    real = candidate.resolve()
    return real if real.is_relative_to(root) and real.is_file() else None


def resolve(entry: Entrypoint, roots: Sequence[Path]) -> Launch:
    """The command line of the entrypoint, found under the first root that holds it."""
    for root in (r.resolve() for r in roots):
        if entry.script is not None:
            script = Path(entry.script)
            # an absolute path joins as itself, so it must lie under the root like any other
            found = None if ".." in script.parts else _inside(root / script, root)
            if found is not None:
                return Launch([sys.executable, str(found), *entry.args], root)
        else:
            assert entry.module is not None
            base = root.joinpath(*entry.module.split("."))
            for candidate in (base.with_suffix(".py"), base / "__main__.py"):
                if _inside(candidate, root) is not None:
                    return Launch([sys.executable, "-m", entry.module, *entry.args], root)
    what = entry.script if entry.script is not None else f"module {entry.module}"
    # the roots themselves stay unnamed: the answer goes to users, the paths are the host's
    raise EntrypointRefused(
        f"entrypoint {what!r} was not found under the allowed roots "
        "(TRAINBOARD_SCRIPT_ROOTS) as a file; '..', absolute paths outside them and "
        "symlinks leading out are refused"
    )
