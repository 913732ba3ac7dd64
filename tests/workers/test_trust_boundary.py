"""The trust boundary read off the tree: what each folder of workers/ may import."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.source_rules import imported_modules

WORKERS = Path(__file__).resolve().parents[2] / "workers"
#: libraries that hold or use credentials: rank code (user-facing, untrusted side) never has them
CREDENTIAL_LIBRARIES = {"redis", "celery", "httpx", "kombu", "sqlalchemy", "psycopg", "backend"}
#: folder -> the folders of ours (besides itself) it may import
ALLOWED = {
    "rank": {"contract"},
    "contract": set(),
    "supervisor": {"devices", "telemetry", "contract"},
    "devices": {"contract", "telemetry"},
}


def our_folder(module: str) -> str | None:
    """The workers/ folder (or top-level module) a module name belongs to, if ours."""
    parts = module.split(".")
    if parts[0] != "workers" or len(parts) < 2:
        return None
    return parts[1] if parts[1] != "telemetry" else "telemetry"


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_a_folder_imports_only_what_its_trust_level_allows(folder: str) -> None:
    files = sorted((WORKERS / folder).rglob("*.py"))
    assert files, f"workers/{folder} has no code"
    bad = []
    for file in files:
        for module in imported_modules(file):
            target = our_folder(module)
            if target is not None and target != folder and target not in ALLOWED[folder]:
                bad.append(f"{file.relative_to(WORKERS)} imports {module}")
    assert bad == []


@pytest.mark.parametrize("folder", ["rank", "contract"])
def test_rank_side_code_imports_no_library_that_reaches_a_credential(folder: str) -> None:
    bad = [
        f"{file.relative_to(WORKERS)} imports {module}"
        for file in sorted((WORKERS / folder).rglob("*.py"))
        for module in imported_modules(file)
        if module.split(".")[0] in CREDENTIAL_LIBRARIES
    ]
    assert bad == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import redis\nfrom workers.node.settings import WorkerSettings\n")
    modules = imported_modules(sample)
    assert "redis" in modules
    assert our_folder("workers.node.settings") == "node"
