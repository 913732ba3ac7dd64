"""POST /api/jobs/validate: a submission's refusals, implications and memory estimate, nothing
stored and nothing counted against the submission limit."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.config import Settings
from tests.backend.conftest import bearer, job_count
from tests.backend.test_jobs_api import GOOD_SPEC, _with

SCRIPT_MISSING = {"name": "s", "entrypoint": {"script": "missing.py"}}
FP16_PIPELINE = {
    **_with("precision", "fp16"),
    "parallelism": {"strategy": "model", "devices": 2, "microbatches": 4},
}
TOO_BIG = _with("parallelism", {"strategy": "data", "devices": 5})

#: specs the JobSpec schema refuses: validate lists the submission's 422 details
SCHEMA_REFUSED = [
    _with("parallelism.devices", -1),
    _with("hyperparameters.batch_size", 0),
    _with("template", "resnet"),
    _with("parallelism", {"strategy": "model", "devices": 3, "pipeline_stages": 2}),
    _with("parallelism", {"strategy": "hybrid", "devices": 3, "pipeline_stages": 2}),
    _with("parallelism", {"strategy": "data", "devices": 2, "microbatches": 2}),
    _with("hyperparameters", {"batch_size": 30})
    | {"parallelism": {"strategy": "model", "devices": 2, "microbatches": 4}},
    _with("colour", "red"),
    _with("name", ""),
    {"name": "s", "entrypoint": {"script": "../etc/passwd"}},
]
#: valid specs this deployment refuses (node n1 has 4 slots): validate lists them as problems
DEPLOYMENT_REFUSED = [SCRIPT_MISSING, FP16_PIPELINE, TOO_BIG]


def _without_input(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors]


@pytest.mark.parametrize("spec", SCHEMA_REFUSED + DEPLOYMENT_REFUSED)
@pytest.mark.usefixtures("node_n1")
def test_each_refusal_a_submission_gets_is_listed_as_a_problem(
    api: TestClient,
    tokens: dict[str, str],
    spec: dict[str, Any],
) -> None:
    alice = bearer(tokens["alice"])
    checked = api.post("/api/jobs/validate", json=spec, headers=alice)
    assert checked.status_code == 200, checked.text
    assert job_count(api, tokens["alice"]) == 0
    submitted = api.post("/api/jobs", json=spec, headers=alice)
    assert submitted.status_code == 422, submitted.text
    answer = checked.json()
    assert answer["valid"] is False
    assert answer["problems"] == _without_input(submitted.json()["detail"])
    assert answer["memory"] is None or spec in DEPLOYMENT_REFUSED


def test_a_refused_spec_still_implies_what_its_valid_parts_do(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice = bearer(tokens["alice"])
    spec = {
        **_with("hyperparameters.lr", 100),  # the template allows at most 10
        "parallelism": {"strategy": "hybrid", "devices": 4, "pipeline_stages": 2},
        "grad_accum": 2,
    }
    answer = api.post("/api/jobs/validate", json=spec, headers=alice).json()
    assert answer["valid"] is False and answer["memory"] is None
    assert [p["loc"] for p in answer["problems"]] == [["body", "hyperparameters"]]
    valid = {**spec, "hyperparameters": {**GOOD_SPEC["hyperparameters"], "lr": 0.1}}
    fixed = api.post("/api/jobs/validate", json=valid, headers=alice).json()
    assert fixed["valid"] is True
    assert answer["implications"] == fixed["implications"]
    assert answer["implications"]["data_parallel_degree"] == 2
    assert answer["implications"]["global_batch"] == 32 * 2 * 2
    script = {"name": "s", "entrypoint": {"script": "../x.py"}, "parallelism": {"devices": 2}}
    implied = api.post("/api/jobs/validate", json=script, headers=alice).json()["implications"]
    assert implied["data_parallel_degree"] == 2 and implied["global_batch"] is None
    broken = _with("parallelism", {"strategy": "model", "devices": 3, "pipeline_stages": 2})
    assert api.post("/api/jobs/validate", json=broken, headers=alice).json()["implications"] is None


@pytest.mark.usefixtures("node_n1")
def test_every_refusal_is_listed_not_only_the_first(
    api: TestClient,
    tokens: dict[str, str],
) -> None:
    spec = {**SCRIPT_MISSING, "parallelism": {"strategy": "data", "devices": 5}}
    answer = api.post("/api/jobs/validate", json=spec, headers=bearer(tokens["alice"])).json()
    assert [".".join(map(str, p["loc"])) for p in answer["problems"]] == [
        "body.entrypoint.script",
        "body.parallelism.devices",
    ]
    assert "the largest node, n1, has 4" in answer["problems"][1]["msg"]
    assert answer["memory"] is None  # a script's model is unknown


@pytest.mark.usefixtures("node_n1")
def test_a_valid_spec_implies_what_its_submission_stores(
    api: TestClient,
    tokens: dict[str, str],
) -> None:
    alice = bearer(tokens["alice"])
    hybrid = {
        **_with("parallelism", {"strategy": "hybrid", "devices": 4, "pipeline_stages": 2}),
        "grad_accum": 3,
    }
    for spec in (GOOD_SPEC, hybrid):
        checked = api.post("/api/jobs/validate", json=spec, headers=alice)
        assert checked.status_code == 200, checked.text
        answer = checked.json()
        assert answer["valid"] is True and answer["problems"] == []
        estimate = api.post("/api/estimate/memory", json=spec, headers=alice).json()
        assert answer["memory"] == estimate
        assert [d["node"] for d in answer["memory"]["devices"]] == ["n1"] * 4
        job = api.post("/api/jobs", json=spec, headers=alice).json()
        assert answer["implications"] == job["implications"]
    assert answer["implications"]["data_parallel_degree"] == 2
    assert answer["implications"]["global_batch"] == 32 * 3 * 2
    assert answer["implications"]["warnings"]  # 4 microbatches < 4 x 2 stages


def test_validating_stores_nothing_and_spends_no_submission(
    api: TestClient, tokens: dict[str, str], settings: Settings
) -> None:
    alice = bearer(tokens["alice"])
    for _ in range(settings.submit_rate_limit + 5):
        assert api.post("/api/jobs/validate", json=GOOD_SPEC, headers=alice).status_code == 200
    assert job_count(api, tokens["alice"]) == 0
    assert api.post("/api/jobs", json=GOOD_SPEC, headers=alice).status_code == 201


def test_validating_needs_the_submit_scope(api: TestClient, tokens: dict[str, str]) -> None:
    assert api.post("/api/jobs/validate", json=GOOD_SPEC).status_code == 401
    minted = api.post("/api/tokens", json={"scopes": ["read"]}, headers=bearer(tokens["alice"]))
    reader = bearer(minted.json()["token"])
    assert api.get("/api/jobs", headers=reader).status_code == 200
    refused = api.post("/api/jobs/validate", json=SCRIPT_MISSING, headers=reader)
    assert refused.status_code == 403
    assert "not found" not in refused.text
