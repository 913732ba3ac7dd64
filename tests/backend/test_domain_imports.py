"""The backend's shape read off the tree: its domains import each other without a circle,
the placement policy does no I/O, and only the executors know how attempts run (that the
job's stored spec is read through its typed model is held by test_spec_reads.py).

A domain is a folder of backend/ (or one of its top-level modules). An arrow A -> B is any
import, at any depth, of B's code by A's domain logic. The HTTP routes (`router.py`,
`*_router.py`) are the outermost layer, an adapter over the domains: a route may call any
domain (the job page's routes read telemetry and checkpoints), so their imports are not
arrows between domains. With no circle, the domains have an order a newcomer can read
bottom-up; docs/architecture.md draws it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tests.source_rules import imported_modules

BACKEND = Path(__file__).resolve().parents[2] / "backend"


def domain_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "backend" or len(parts) < 2:
        return None
    return parts[1]


def arrows() -> dict[str, dict[str, list[str]]]:
    """domain -> domain it imports -> the files that do."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for file in sorted(BACKEND.rglob("*.py")):
        relative = file.relative_to(BACKEND)
        me = relative.parts[0].removesuffix(".py")
        if relative.stem == "router" or relative.stem.endswith("_router"):
            continue  # the HTTP adapter: above every domain
        for module in imported_modules(file):
            other = domain_of(module)
            if other is not None and other != me and str(relative) not in found[me][other]:
                found[me][other].append(str(relative))
    return found


def circles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one domain (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, {}):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_backend_domain_imports_another_in_a_circle() -> None:
    graph = arrows()
    found = circles(graph)
    described = [
        f"{' <-> '.join(group)}: "
        + "; ".join(
            f"{a} -> {b} ({', '.join(graph[a][b])})" for a in group for b in group if b in graph[a]
        )
        for group in found
    ]
    assert described == []


def test_the_placement_policy_imports_nothing_that_does_io() -> None:
    files = sorted((BACKEND / "placement").rglob("*.py"))
    assert files
    bad = [
        f"{file.name} imports {module}"
        for file in files
        for module in imported_modules(file)
        if not module.startswith(("backend.placement", "__future__", "collections", "dataclasses"))
        and module.split(".")[0] not in {"typing", "math", "itertools", "functools", "heapq"}
    ]
    assert bad == []


def test_only_the_executors_know_how_attempts_run() -> None:
    """Celery, its task names and the node agents' code are the node pool's business."""
    how = ("celery", "kombu", "workers.node", "workers.contract.protocol.RUN_ATTEMPT_TASK")
    bad = [
        f"{file.relative_to(BACKEND)} imports {module}"
        for file in sorted(BACKEND.rglob("*.py"))
        if file.relative_to(BACKEND).parts[0] not in {"executors", "launcher.py", "cli"}
        for module in imported_modules(file)
        if module.startswith(how)
    ]
    assert bad == []
