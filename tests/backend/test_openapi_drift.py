"""The frontend's committed API schema is the backend's.

`make api-types` regenerates frontend/openapi.json; a route or schema changed without it
fails here. The TypeScript types (src/api/schema.d.ts) are generated from that file by
every frontend build (`npm run gen:api`), so they cannot drift from it.
"""

from __future__ import annotations

from pathlib import Path

from backend.app import schema_text

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
REGENERATE = "run `make api-types` and commit frontend/openapi.json"


def test_committed_openapi_json_is_the_backends_schema() -> None:
    committed = (FRONTEND / "openapi.json").read_text()
    assert committed == schema_text() + "\n", f"frontend/openapi.json drifted: {REGENERATE}"
