"""Schemathesis over the whole OpenAPI schema, in-process, as an admin (SQLite) and as an
ordinary user (PostgreSQL): over 1,000 generated requests each, no 5xx, no schema lies."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from backend.app import create_app
from backend.auth.service import authenticate
from backend.config import Settings
from backend.db import Database
from tests.backend.conftest import bearer

CHECKS = [
    not_a_server_error,
    status_code_conformance,  # every status answered is declared (#30: 4xx were missing)
    response_schema_conformance,
    content_type_conformance,
    negative_data_rejection,
]
EXAMPLES = {GenerationMode.POSITIVE: 30, GenerationMode.NEGATIVE: 15}
NODE_PATHS = ("/api/nodes/register", "/api/nodes/{name}/heartbeat", "/api/attempts/")
#: who calls every non-node route, and on which database
IDENTITIES = {"admin": "sqlite", "alice": "postgres"}
MIN_CALLS = 1000


@pytest.fixture(params=list(IDENTITIES))
def identity(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def settings(settings: Settings, identity: str, request: pytest.FixtureRequest) -> Settings:
    """The API tests' settings, on the identity's database (PostgreSQL refuses NUL in text)."""
    if IDENTITIES[identity] == "sqlite":
        return settings
    postgres = request.getfixturevalue("migrated_postgres_url")
    return settings.model_copy(update={"database_url": postgres})


@pytest.fixture
def fuzz_app(settings: Settings, tokens: dict[str, str]) -> Iterator[FastAPI]:
    """The app with its lifespan running and rate limits out of the way."""
    unlimited = {f"{kind}_rate_limit": 10**6 for kind in ("login", "submit", "token", "webhook")}
    app = create_app(settings.model_copy(update=unlimited))
    with TestClient(app):
        yield app


def _takes_text(schema: dict[str, Any]) -> bool:
    """Whether a query parameter's schema takes a string, or a list of strings."""
    kinds = [schema, *schema.get("anyOf", [])]
    return any(
        kind.get("type") == "string"
        or (kind.get("type") == "array" and kind.get("items", {}).get("type") == "string")
        for kind in kinds
    )


def text_in_query(case: schemathesis.Case) -> bool:
    """Whether the case puts anything but a string (a boolean, a number, an object) in a
    query parameter that takes text.

    A query string carries only text: `metric=false` reaches the server as the string
    "false", a valid metric name, and an object `q={}` as `q=`, no text at all, so taking
    them is right and no schema lie; schemathesis' negative mode draws such values for
    `str | None` and `list[str] | None` parameters now and then."""
    raw = case.operation.definition.raw
    schemas = {
        p["name"]: p.get("schema", {}) for p in raw.get("parameters", []) if p["in"] == "query"
    }
    for name, value in (case.query or {}).items():
        values = value if isinstance(value, list) else [value]
        not_text = any(not isinstance(v, str) for v in values)
        if not_text and name in schemas and _takes_text(schemas[name]):
            return True
    return False


def _fuzz(
    operation: APIOperation,
    mode: GenerationMode,
    *,
    headers: dict[str, str],
    keep_token: int,
    calls: Counter[int],
) -> None:
    """Call the operation with generated requests; any failed check raises, shrunk."""

    @hypothesis_settings(
        max_examples=EXAMPLES[mode],
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: schemathesis.Case) -> None:
        if (case.path_parameters or {}).get("token_id") == keep_token:
            return  # revoking the fuzzer's own token would make every later call a 401
        response = case.call(headers=headers)
        calls[response.status_code] += 1
        ambiguous = mode is GenerationMode.NEGATIVE and text_in_query(case)
        checks = [c for c in CHECKS if not (ambiguous and c is negative_data_rejection)]
        case.validate_response(response, checks=checks, headers=headers)

    exercise()


@pytest.mark.slow  # thousands of generated requests: make test runs it, make test-fast not
def test_every_operation_survives_generated_input(
    fuzz_app: FastAPI, tokens: dict[str, str], database: Database, identity: str
) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    with database.session() as session:
        caller = authenticate(session, tokens[identity])
    assert caller is not None and caller.is_admin == (identity == "admin")
    calls: Counter[int] = Counter()
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the schema itself is valid
        operation = result.ok()
        token = tokens["node"] if operation.path.startswith(NODE_PATHS) else tokens[identity]
        for mode in EXAMPLES:
            # an operation whose only inputs are free strings has no invalid input to send
            unsatisfiable_ok = (Unsatisfiable,) if mode is GenerationMode.NEGATIVE else ()
            with contextlib.suppress(*unsatisfiable_ok):
                _fuzz(
                    operation, mode, headers=bearer(token), keep_token=caller.token_id, calls=calls
                )
    assert calls.total() >= MIN_CALLS, calls
    assert not [code for code in calls if code >= 500], calls
