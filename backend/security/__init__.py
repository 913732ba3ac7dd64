"""Hostile-input defences wrapped around the app: Host, Origin, body size, paths, headers
(rate limits are dependencies: backend/security/ratelimit.py)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.middleware.cors import CORSMiddleware

from backend.config import Settings
from backend.security.body import BodyGuard
from backend.security.errors import validation_error
from backend.security.headers import SecurityHeaders
from backend.security.hosts import HostGuard
from backend.security.paths import PathGuard


def install(app: FastAPI, settings: Settings) -> None:
    """Wrap app in the guards; the first listed here is the innermost."""
    app.add_exception_handler(RequestValidationError, validation_error)
    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_credentials=True,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(PathGuard)
    app.add_middleware(
        BodyGuard, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
    )
    app.add_middleware(
        HostGuard, allowed=settings.allowed_host_set, origins=settings.cors_origin_list
    )
    app.add_middleware(SecurityHeaders)
