"""Huge, deep and strange bodies, and every kind of path traversal, refused cleanly."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from tests.backend.conftest import bearer, job_count
from tests.backend.shared_app import shared_api, shared_settings, shared_tokens  # noqa: F401

MIB = 1 << 20


def _nothing_written(api: TestClient, token: str, name: str) -> bool:
    """No job of that name is stored (no test of this module stores one under a refused name)."""
    jobs = api.get("/api/jobs", params={"limit": 1000}, headers=bearer(token)).json()["jobs"]
    return all(job["name"] != name for job in jobs)


def test_a_body_over_the_limit_gets_413(api: TestClient, tokens: dict[str, str]) -> None:
    spec = {"name": "x", "template": "mlp", "tags": ["a" * MIB]}
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert response.status_code == 413
    assert "larger than 1048576 bytes" in response.json()["detail"]
    assert _nothing_written(api, tokens["alice"], "x")


def test_a_streamed_body_without_length_is_cut_at_the_limit(
    api: TestClient, tokens: dict[str, str]
) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"name": "x", "template": "mlp", "tags": ["'
        for _ in range(2 * 16):
            yield b"a" * (64 * 1024)
        yield b'"]}'

    headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
    response = api.post("/api/jobs", content=chunks(), headers=headers)
    assert response.status_code == 413
    assert _nothing_written(api, tokens["alice"], "x")


@pytest.mark.parametrize("depth", [33, 10_000, 500_000])
def test_deeply_nested_json_is_refused_cleanly(
    api: TestClient, tokens: dict[str, str], depth: int
) -> None:
    body = '{"name": "x", "template": "mlp", "hyperparameters": ' + "[" * depth + "]" * depth + "}"
    headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
    response = api.post("/api/jobs", content=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == "JSON nested deeper than 32 levels"
    assert api.get("/api/health").status_code == 200


def test_brackets_inside_strings_do_not_count_as_nesting(
    api: TestClient, tokens: dict[str, str]
) -> None:
    spec = {"name": "[" * 100 + '\\"{', "template": "mlp"}
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    "name",
    [
        "evil\x00name",
        "bell\x07",
        "esc\x1b[31mred",
        "rtl\u202eoverride",
        "zero\u200bwidth",
        "\ud800",
    ],
)
def test_control_and_format_characters_in_names_are_refused(
    api: TestClient, tokens: dict[str, str], name: str
) -> None:
    body = json.dumps({"name": name, "template": "mlp"})  # ASCII, with \u escapes
    headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
    assert api.post("/api/jobs", content=body, headers=headers).status_code == 422
    assert _nothing_written(api, tokens["alice"], name)


def test_invalid_utf8_is_refused(api: TestClient, tokens: dict[str, str]) -> None:
    body = b'{"name": "\xff\xfe", "template": "mlp"}'
    headers = {**bearer(tokens["alice"]), "Content-Type": "application/json"}
    response = api.post("/api/jobs", content=body, headers=headers)
    assert response.status_code == 400 and "parsing the body" in response.text


@pytest.mark.parametrize("tag", ["ok tag", "t\x00", "ünïcode", "a" * 65, "-leading", "<script>"])
def test_tags_are_plain(api: TestClient, tokens: dict[str, str], tag: str) -> None:
    spec = {"name": "x", "template": "mlp", "tags": [tag]}
    assert api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"])).status_code == 422


def test_unicode_names_are_stored_and_returned_intact(
    api: TestClient, tokens: dict[str, str]
) -> None:
    name = "训练 🚀 Ünïcödé"
    job = api.post(
        "/api/jobs", json={"name": name, "template": "mlp"}, headers=bearer(tokens["alice"])
    )
    assert job.status_code == 201 and job.json()["name"] == name


@pytest.mark.parametrize(
    "script",
    [
        "../outside.py",
        "sub/../../outside.py",
        "..\\outside.py",
        "%2e%2e/outside.py",
        "%252e%252e%252foutside.py",
        "..%2foutside.py",
        "ok.py\x00.txt",
        "/etc/passwd",
        "escape/outside.py",
        "link.py",
    ],
)
def test_entrypoint_traversal_is_refused(
    api: TestClient, tokens: dict[str, str], settings: Settings, script: str
) -> None:
    root = settings.script_root_paths[0]
    outside = root.parent / "outside.py"
    outside.write_text("print('pwned')\n")
    (root / "escape").mkdir(exist_ok=True)
    if not (root / "escape" / "outside.py").exists():
        os.symlink(outside, root / "escape" / "outside.py")
        os.symlink(outside, root / "link.py")
    spec = {"name": "t", "entrypoint": {"script": script}}
    response = api.post("/api/jobs", json=spec, headers=bearer(tokens["alice"]))
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "entrypoint", "script"]]
    assert _nothing_written(api, tokens["alice"], "t")


def test_static_files_are_served_only_from_the_frontend_directory(
    settings: Settings, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html>index</html>")
    (tmp_path / "secret.txt").write_text("top secret")
    with TestClient(create_app(settings.model_copy(update={"frontend_dir": dist}))) as api:
        for path in (
            "/../secret.txt",
            "/%2e%2e/secret.txt",
            "/..%2fsecret.txt",
            "/assets/../../secret.txt",
            "/%252e%252e/secret.txt",
        ):
            response = api.get(path)
            assert "top secret" not in response.text, path


def test_a_nul_in_a_static_path_is_404_not_500(settings: Settings, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html>index</html>")
    (dist / "assets" / "app.js").write_text("app()")
    app = create_app(settings.model_copy(update={"frontend_dir": dist}))
    with TestClient(app, raise_server_exceptions=False) as api:
        for path in ("/%00", "/index.html%00.txt", "/assets/app.js%00", "/api/jobs/1/metrics/a%00"):
            assert api.get(path).status_code == 404, path
        assert api.get("/" + "a" * 5000).text == "<html>index</html>"
        assert api.get("/assets/app.js").text == "app()"


def test_overflowing_numbers_in_clone_and_resume_get_422_naming_the_field(
    api: TestClient, tokens: dict[str, str]
) -> None:
    alice = bearer(tokens["alice"])
    job = api.post("/api/jobs", json={"name": "p", "template": "mlp"}, headers=alice).json()
    api.post(f"/api/jobs/{job['id']}/cancel", headers=alice)
    before = job_count(api, tokens["alice"])
    headers = {**alice, "Content-Type": "application/json"}
    for route, body, loc in [
        ("clone", '{"grad_clip": 1e999}', ["body", "grad_clip"]),
        ("clone", '{"hyperparameters": {"lr": -1e999}}', ["body", "hyperparameters"]),
        ("clone", '{"parallelism": {"devices": 1e999}}', ["body", "parallelism", "devices"]),
        ("resume", '{"devices": 1e999}', ["body", "devices"]),
        ("resume", '{"devices": "2"}', ["body", "devices"]),
        ("resume", '{"devices": true}', ["body", "devices"]),
    ]:
        response = api.post(f"/api/jobs/{job['id']}/{route}", content=body, headers=headers)
        assert response.status_code == 422, (route, body, response.text)
        assert [e["loc"] for e in response.json()["detail"]] == [loc], response.text
    assert job_count(api, tokens["alice"]) == before  # no clone was made


@pytest.mark.parametrize(
    ("route", "body", "where"),
    [
        ("/api/login", {"username": "a\x00b", "password": "x"}, ["username"]),
        ("/api/tokens", {"scopes": ["read"], "name": "n\x00"}, ["name"]),
        ("/api/jobs", {"name": "n", "template": "mlp", "tags": ["ok", "a\x00"]}, ["tags", 1]),
    ],
)
def test_a_nul_in_a_json_string_is_422_naming_where(
    api: TestClient,
    tokens: dict[str, str],
    route: str,
    body: dict[str, object],
    where: list[object],
) -> None:
    response = api.post(route, json=body, headers=bearer(tokens["alice"]))
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", *where] and "NUL" in error["msg"]
