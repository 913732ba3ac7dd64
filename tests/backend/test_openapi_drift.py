"""The frontend's committed API schema and its generated TypeScript types are the backend's.

`make api-types` regenerates both; a route or schema changed without it fails here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from backend.app import schema_text

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
GENERATOR = FRONTEND / "node_modules" / ".bin" / "openapi-typescript"
REGENERATE = "run `make api-types` and commit openapi.json and src/api/schema.d.ts"


def test_committed_openapi_json_is_the_backends_schema() -> None:
    committed = (FRONTEND / "openapi.json").read_text()
    assert committed == schema_text() + "\n", f"frontend/openapi.json drifted: {REGENERATE}"


@pytest.mark.skipif(
    not GENERATOR.exists() or shutil.which("node") is None,
    reason="frontend/node_modules not installed (npm ci in frontend/)",
)
def test_committed_typescript_types_are_generated_from_the_schema(tmp_path: Path) -> None:
    schema = tmp_path / "openapi.json"
    schema.write_text(schema_text() + "\n")
    out = tmp_path / "schema.d.ts"
    subprocess.run(
        [str(GENERATOR), str(schema), "-o", str(out)],
        cwd=FRONTEND,
        check=True,
        capture_output=True,
        timeout=60,
    )
    committed = (FRONTEND / "src" / "api" / "schema.d.ts").read_text()
    assert committed == out.read_text(), f"frontend/src/api/schema.d.ts drifted: {REGENERATE}"
