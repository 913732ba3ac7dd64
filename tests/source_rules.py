"""Rules read off the source tree: the shared walk of the tests that hold them.

Each such test names a checker (source text in, offending line numbers out) and asserts
that no file of a tree breaks it; `violations` does the walk and names each place.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def violations(files: Iterable[Path], check: Callable[[str], Iterable[int]]) -> list[str]:
    """`path:line` (relative to the repository) of every place `check` finds in `files`."""
    return [
        f"{file.relative_to(ROOT)}:{line}"
        for file in sorted(files)
        for line in check(file.read_text())
    ]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, absolute names (`from a import b` gives a and a.b)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found
