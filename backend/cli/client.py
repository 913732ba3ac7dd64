"""The CLI's HTTP client: the API URL and token from flags or the environment."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    """An API answer the CLI turns into a readable message and exit code."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(format_detail(detail))
        self.status = status


def format_detail(detail: Any) -> str:
    """FastAPI's error detail as lines a person can read (field: message)."""
    if isinstance(detail, list):
        lines = []
        for error in detail:
            loc = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "spec"
            message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
            lines.append(f"{loc}: {message}")
        return "\n".join(lines)
    return str(detail)


class Client:
    def __init__(self, api_url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=api_url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise ApiError(0, f"cannot reach Trainboard at {self.http.base_url}: {err}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, detail)
        return response.json() if response.content else None
