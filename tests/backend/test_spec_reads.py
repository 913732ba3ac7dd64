"""The stored spec keeps its type: backend code reads a job's spec as the contract's JobSpec
(`Job.spec_model`), never as a dict with defaults of its own (issue #31).

The one exception is a SQL JSON path on the column itself (`Job.spec["tags"]` in a query:
the run table filters and sorts by spec paths in the database, not in Python).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_rules import violations

BACKEND = Path(__file__).resolve().parents[2] / "backend"


def _is_stored_spec(node: ast.expr) -> bool:
    """`x.spec` (a job's stored spec) or a variable named `spec`, but not the column `Job.spec`."""
    if isinstance(node, ast.Attribute) and node.attr == "spec":
        return not (isinstance(node.value, ast.Name) and node.value.id == "Job")
    return isinstance(node, ast.Name) and node.id == "spec"


def dict_reads(source: str) -> list[int]:
    """Lines where the source subscripts a stored spec or calls .get() on it."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        subscript = isinstance(node, ast.Subscript) and _is_stored_spec(node.value)
        get = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and _is_stored_spec(node.func.value)
        )
        if (subscript or get) and isinstance(node, ast.expr):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_backend_code_reads_the_stored_spec_as_a_dict() -> None:
    files = sorted(BACKEND.rglob("*.py"))
    assert files, "backend/ has no code"
    bad = violations(files, dict_reads)
    assert bad == [], "read job.spec_model (a JobSpec) instead of the stored dict"


def test_the_checker_sees_a_dict_read_and_spares_a_sql_path() -> None:
    sample = (
        "a = job.spec.get('max_restarts', 0)\n"
        "b = jobs[1].spec['parallelism']\n"
        "c = spec.get('preemptible', True)\n"
        "d = Job.spec['tags'].as_string()\n"
        "e = job.spec_model.max_restarts\n"
    )
    assert dict_reads(sample) == [1, 2, 3]
