"""Every JobSpec field and template hyperparameter, at and past its bounds, and of a wrong type."""

from __future__ import annotations

import typing
from typing import Any

import annotated_types as at
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, ValidationError

from tests.backend.conftest import bearer, job_count
from tests.backend.shared_app import shared_api, shared_tokens  # noqa: F401
from tests.specs import with_field
from workers.contract.catalog import TEMPLATES
from workers.contract.spec import JobSpec, Strict

GOOD: dict[str, Any] = {"name": "bounds", "template": "mlp", "hyperparameters": {"steps": 10}}
#: free-form hyperparameters are bounded for entrypoint jobs; templates take only their own
ENTRYPOINT: dict[str, Any] = {"name": "bounds", "entrypoint": {"module": "train"}}


def _leaves(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any, list[Any]]]:
    found = []
    for name, field in model.model_fields.items():
        kinds = (field.annotation, *typing.get_args(field.annotation))
        nested = [k for k in kinds if isinstance(k, type) and issubclass(k, Strict)]
        if nested:
            found += _leaves(nested[0], f"{prefix}{name}.")
        else:
            found.append((prefix + name, field.annotation, field.metadata))
    return found


LEAVES = _leaves(JobSpec)


def _filled(length: int, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is dict:
        strings = typing.get_args(annotation)[1] is str
        return {f"k{i}": f"v{i}" if strings else i for i in range(length)}
    if origin is list:
        return [f"t{i}" for i in range(length)]
    return "a" * length


def _cases() -> list[tuple[str, Any, Any]]:
    """(field, a value at its bound, a value past it) for every bounded field."""
    cases: list[tuple[str, Any, Any]] = []
    for path, annotation, metadata in LEAVES:
        for bound in metadata:
            if isinstance(bound, at.Ge):
                ge: Any = bound.ge
                cases.append((path, ge, ge - 1))
            elif isinstance(bound, at.Gt):
                gt: Any = bound.gt
                cases.append((path, gt + 0.5, gt))
            elif isinstance(bound, at.Le):
                le: Any = bound.le
                cases.append((path, le, le + 1))
            elif isinstance(bound, at.MaxLen):
                n = bound.max_length
                cases.append((path, _filled(n, annotation), _filled(n + 1, annotation)))
            elif isinstance(bound, at.MinLen) and bound.min_length > 0:
                n = bound.min_length
                cases.append((path, _filled(n, annotation), _filled(n - 1, annotation)))
    return cases


def _with(path: str, value: Any, base: dict[str, Any] = GOOD) -> dict[str, Any]:
    return with_field(base, path, value)


def _field_errors(spec: dict[str, Any], path: str) -> list[Any]:
    try:
        JobSpec.model_validate(spec)
    except ValidationError as err:
        return [e for e in err.errors() if ".".join(map(str, e["loc"])) == path]
    return []


def test_the_bounds_cover_the_spec() -> None:
    assert len(_cases()) >= 35


@pytest.fixture
def lenient(api: TestClient) -> TestClient:
    """The module's app, without a practical submission limit: these tests submit many specs."""
    return api


def test_at_bound_is_valid_and_past_it_is_refused_by_the_api(
    lenient: TestClient, tokens: dict[str, str]
) -> None:
    before = job_count(lenient, tokens["alice"])
    api = lenient
    for path, at_bound, past in _cases():
        base = ENTRYPOINT if path == "hyperparameters" else GOOD
        assert _field_errors(_with(path, at_bound, base), path) == [], (path, at_bound)
        response = api.post("/api/jobs", json=_with(path, past), headers=bearer(tokens["alice"]))
        assert response.status_code == 422, (path, past, response.text)
        locs = {".".join(map(str, e["loc"][1:])) for e in response.json()["detail"]}
        assert path in locs, (path, locs)
    assert job_count(api, tokens["alice"]) == before  # nothing was stored


def test_wrong_types_are_refused_naming_the_field(
    lenient: TestClient, tokens: dict[str, str]
) -> None:
    api = lenient
    for path, annotation, _ in LEAVES:
        wrong = 5 if typing.get_origin(annotation) in (list, dict) else [[1]]
        response = api.post("/api/jobs", json=_with(path, wrong), headers=bearer(tokens["alice"]))
        assert response.status_code == 422, path
        locs = {".".join(map(str, e["loc"][1:4])) for e in response.json()["detail"]}
        assert any(loc.startswith(path) for loc in locs), (path, locs)


def test_hyperparameters_past_their_range_are_refused(
    lenient: TestClient, tokens: dict[str, str]
) -> None:
    api = lenient
    for name, param in TEMPLATES["mlp"].items():
        ends = [v for v in (param.minimum, param.maximum) if v is not None]
        for value in ends:
            assert _field_errors(_with(f"hyperparameters.{name}", value), "hyperparameters") == []
        past: list[Any] = [param.minimum - 1] if param.minimum is not None else []
        past += [param.maximum + 1] if param.maximum is not None else []
        past += ["not a choice"] if param.choices else []
        for value in past:
            spec = _with(f"hyperparameters.{name}", value)
            response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
            assert response.status_code == 422 and name in response.text, (name, value)


def test_nan_and_infinity_are_refused(api: TestClient, tokens: dict[str, str]) -> None:
    before = job_count(api, tokens["alice"])
    headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
    for field, literal in [
        ('"parallelism": {"bucket_cap_mb": NaN}', "NaN"),
        ('"grad_clip": Infinity', "Infinity"),
        ('"hyperparameters": {"lr": NaN}', "NaN"),
        ('"lr_schedule": {"min_lr_ratio": -Infinity}', "-Infinity"),
    ]:
        body = '{"name": "n", "template": "mlp", ' + field + "}"
        response = api.post("/api/jobs", content=body, headers=headers)
        assert response.status_code == 422, (literal, response.text)
    assert job_count(api, tokens["alice"]) == before  # nothing was stored


def test_a_template_spec_without_hyperparameters_takes_the_defaults(
    api: TestClient, tokens: dict[str, str]
) -> None:
    spec = {"name": "defaults", "template": "mlp"}
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert response.status_code == 201, response.text
    assert (
        response.json()["spec"]["hyperparameters"]["layers"] == TEMPLATES["mlp"]["layers"].default
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("parallelism.devices", "2"),
        ("parallelism.devices", True),
        ("parallelism.devices", 2.0),
        ("parallelism.pipeline_stages", "2"),
        ("grad_accum", "1"),
        ("max_restarts", False),
        ("checkpoint.every_steps", "10"),
        ("parallelism.bucket_cap_mb", "25"),
        ("parallelism.bucket_cap_mb", True),
        ("grad_clip", "1.0"),
    ],
)
def test_numbers_are_strict_no_strings_or_booleans(
    lenient: TestClient, tokens: dict[str, str], path: str, value: Any
) -> None:
    response = lenient.post("/api/jobs", json=_with(path, value), headers=bearer(tokens["alice"]))
    assert response.status_code == 422, (path, value, response.text)
    assert [".".join(map(str, e["loc"][1:])) for e in response.json()["detail"]] == [path]


@pytest.mark.parametrize("field", ["grad_clip", "parallelism.bucket_cap_mb", "hyperparameters.lr"])
def test_an_overflowing_number_gets_422_naming_the_field(
    api: TestClient, tokens: dict[str, str], field: str
) -> None:
    *parents, leaf = field.split(".")
    body = '{"name": "o", "template": "mlp", ' + "".join(f'"{p}": {{' for p in parents)
    body += f'"{leaf}": 1e999' + "}" * len(parents) + "}"
    headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
    response = api.post("/api/jobs", content=body, headers=headers)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert ".".join(error["loc"][1:]) == field.removesuffix(".lr")
    assert leaf in error["msg"] or leaf in error["loc"], error


def test_a_non_finite_free_form_hyperparameter_is_refused_not_stored_as_null(
    api: TestClient, tokens: dict[str, str]
) -> None:
    before = job_count(api, tokens["alice"])
    for value in ("1e999", '{"deep": [1, -1e999]}'):
        body = '{"name": "f", "entrypoint": {"module": "train"}, "hyperparameters": {"lr": '
        headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
        response = api.post("/api/jobs", content=body + value + "}}", headers=headers)
        assert response.status_code == 422, response.text
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", "hyperparameters"] and "lr" in error["msg"], error
        assert "finite" in error["msg"]
    assert job_count(api, tokens["alice"]) == before  # nothing was stored
