"""One `Priority` enum (workers/contract/spec.py): names and queue ranks in one table."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_rules import violations
from workers.contract.spec import Priority

ROOT = Path(__file__).resolve().parents[2]
NAMES = {p.value for p in Priority}


def priority_tables(source: str) -> list[int]:
    """Lines of a literal tuple, list, set or dict that spells two or more priority names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        items: list[ast.expr | None] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys) + list(node.values)
        names = {i.value for i in items if isinstance(i, ast.Constant)} & NAMES
        if len(names) >= 2 and isinstance(node, ast.expr):
            found.append(node.lineno)
    return found


def test_ranks_order_the_queue_high_first_and_map_back() -> None:
    assert [p.rank for p in Priority] == [0, 1, 2]
    assert Priority.high.rank < Priority.normal.rank < Priority.low.rank
    assert [Priority.of_rank(p.rank) for p in Priority] == list(Priority)


def test_no_other_copy_of_the_priority_table() -> None:
    files = sorted((ROOT / "backend").rglob("*.py")) + sorted(
        (ROOT / "workers" / "contract").rglob("*.py")
    )
    bad = violations(files, priority_tables)
    assert bad == [], "import workers.contract.spec.Priority instead"


def test_the_checker_sees_a_copied_table() -> None:
    sample = (
        'RANK = {"high": 0, "normal": 1, "low": 2}\n'
        'NAMES = ("high", "normal", "low")\n'
        'OTHER = ("high", "fast")\n'
    )
    assert priority_tables(sample) == [1, 2]
