"""A job's own environment variables (spec.env): the user's own pass, hijacks are refused."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from tests.backend.conftest import bearer, job_count
from tests.backend.shared_app import shared_api, shared_tokens  # noqa: F401
from workers.contract.spec import JobSpec

SPEC: dict[str, Any] = {"name": "env", "template": "mlp"}
REFUSED = [
    "TRAINBOARD_DATABASE_URL",
    "TRAINBOARD_NODE_TOKEN",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "CUDA_VISIBLE_DEVICES",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PATH",
    "HOME",
    "BASH_ENV",
    "ENV",
    "IFS",
    "PERL5OPT",
    "PERL5LIB",
    "NODE_OPTIONS",
    "GCONV_PATH",
    "MALLOC_CHECK_",
    "GLIBC_TUNABLES",
]
MALFORMED = ["1ST", "A-B", "A B", "A=B", "", "é", "N" * 129]


@pytest.fixture
def lenient(api: TestClient) -> TestClient:
    """The module's app, without a practical submission limit: these tests submit many specs."""
    return api


def _submit(api: TestClient, token: str, env: Any) -> Any:
    return api.post("/api/jobs", json={**SPEC, "env": env}, headers=bearer(token))


def test_the_users_own_and_nccl_variables_are_kept(
    lenient: TestClient, tokens: dict[str, str]
) -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "MY_FLAG": "", "_x1": "a=b c"}
    response = _submit(lenient, tokens["alice"], env)
    assert response.status_code == 201, response.text
    job = lenient.get(f"/api/jobs/{response.json()['id']}", headers=bearer(tokens["alice"]))
    assert job.json()["spec"]["env"] == env


def test_env_defaults_to_empty(lenient: TestClient, tokens: dict[str, str]) -> None:
    response = lenient.post("/api/jobs", json=SPEC, headers=bearer(tokens["alice"]))
    assert response.status_code == 201 and response.json()["spec"]["env"] == {}


@pytest.mark.parametrize("name", REFUSED + MALFORMED)
def test_reserved_and_malformed_names_get_422_naming_the_variable(
    lenient: TestClient, tokens: dict[str, str], name: str
) -> None:
    before = job_count(lenient, tokens["alice"])
    response = _submit(lenient, tokens["alice"], {"NCCL_DEBUG": "INFO", name: "x"})
    assert response.status_code == 422, (name, response.text)
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "env"]
    assert repr(name[:70]) in error["msg"], error["msg"]
    assert job_count(lenient, tokens["alice"]) == before  # nothing was stored


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({f"V{i}": "1" for i in range(65)}, "at most 64"),
        ({"BIG": "x" * 4097}, "at most 4096 characters"),
        ({"NUM": 1}, "valid string"),
        ({"ON": True}, "valid string"),
        (["A=1"], "valid dictionary"),
    ],
)
def test_bounds_and_types_of_env(
    lenient: TestClient, tokens: dict[str, str], env: Any, words: str
) -> None:
    response = _submit(lenient, tokens["alice"], env)
    assert response.status_code == 422 and words in response.text, response.text[:300]
    assert all(e["loc"][:2] == ["body", "env"] for e in response.json()["detail"])


def test_a_nul_in_a_value_is_refused() -> None:
    with pytest.raises(ValidationError, match="'A': value must not contain NUL"):
        JobSpec.model_validate({**SPEC, "env": {"A": "x\x00y"}})


def test_a_nul_in_a_value_is_refused_by_the_api_naming_the_variable(
    lenient: TestClient, tokens: dict[str, str]
) -> None:
    response = _submit(lenient, tokens["alice"], {"A": "x\x00y"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "env", "A"]


def test_a_spec_stored_before_env_existed_still_reads(lenient: TestClient) -> None:
    stored = JobSpec.model_validate(SPEC).model_dump(mode="json")
    stored.pop("env")
    assert JobSpec.model_validate(stored).env == {}
