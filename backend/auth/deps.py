"""FastAPI dependencies shared by every router, as Annotated aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status
from pydantic import Field
from sqlalchemy.orm import Session

from backend.auth.service import Principal, authenticate
from backend.config import Settings
from backend.db import Database
from backend.security.hosts import origin_allowed
from backend.security.ratelimit import count_against

SESSION_COOKIE = "trainboard_session"
#: ids are INTEGER columns; a larger number cannot name a row (and overflows the driver)
MAX_ID = 2**31 - 1
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_database(request: Request) -> Database:
    database: Database = request.app.state.db
    return database


def get_session(database: Annotated[Database, Depends(get_database)]) -> Iterator[Session]:
    """A request-scoped session, committed when the handler returns without error."""
    with database.session() as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
#: scope="function": the commit runs when the handler returns, before the response is sent
#: (FastAPI's default runs it after the response, so a client's next request - the
#: browser's GET /api/me right after POST /api/login - could miss what the first one wrote)
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ObjectId = Annotated[int, Path(ge=1, le=MAX_ID, description="a row id")]
#: a row id inside a list (e.g. a repeated query parameter)
RowId = Annotated[int, Field(ge=1, le=MAX_ID)]


def credentials_from(headers: dict[str, str] | object, cookies: dict[str, str]) -> tuple[str, str]:
    """The secret a request carries and where it came from ('bearer' or 'cookie')."""
    auth = getattr(headers, "get", lambda _k: None)("authorization") or ""
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), "bearer"
    return cookies.get(SESSION_COOKIE, ""), "cookie"


def refuse_cross_site(request: Request, settings: SettingsDep) -> None:
    """403 for a write a browser sent from another site (foreign Origin or Sec-Fetch-Site)."""
    if request.method in SAFE_METHODS:
        return
    origin = request.headers.get("origin")
    if not origin_allowed(origin, request.headers.get("host"), settings.cors_origin_list):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "cross-origin request refused")
    if origin is None and request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "cross-site request refused")


def get_principal(request: Request, session: SessionDep, settings: SettingsDep) -> Principal:
    """The authenticated caller; 401 without valid credentials, 403 on a cross-site write."""
    secret, source = credentials_from(request.headers, request.cookies)
    principal = authenticate(session, secret) if secret else None
    if principal is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "authentication required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if source == "cookie":
        refuse_cross_site(request, settings)
    return principal


def require_scope(scope: str) -> object:
    """A dependency that admits only principals holding scope."""

    def check(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
        if scope not in principal.scopes or (scope == "admin" and not principal.is_admin):
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"this needs the {scope!r} scope")
        return principal

    return check


ReaderDep = Annotated[Principal, Depends(require_scope("read"))]
SubmitterDep = Annotated[Principal, Depends(require_scope("submit"))]
AdminDep = Annotated[Principal, Depends(require_scope("admin"))]
NodeDep = Annotated[Principal, Depends(require_scope("node"))]


def _submission(request: Request, principal: SubmitterDep, settings: SettingsDep) -> Principal:
    """A submitter, counted: submit and clone share one limit per user."""
    limit = settings.submit_rate_limit
    count_against(request, settings, bucket="submit", user_id=principal.user_id, limit=limit)
    return principal


def _minting(request: Request, principal: ReaderDep, settings: SettingsDep) -> Principal:
    """A caller minting a token, counted per user (a new token gets no fresh allowance)."""
    limit = settings.token_rate_limit
    count_against(request, settings, bucket="tokens", user_id=principal.user_id, limit=limit)
    return principal


def _webhook_creation(
    request: Request, principal: SubmitterDep, settings: SettingsDep
) -> Principal:
    """A submitter creating a webhook, counted per user."""
    limit = settings.webhook_rate_limit
    count_against(request, settings, bucket="webhooks", user_id=principal.user_id, limit=limit)
    return principal


SubmissionDep = Annotated[Principal, Depends(_submission)]
WebhookCreationDep = Annotated[Principal, Depends(_webhook_creation)]
MintingDep = Annotated[Principal, Depends(_minting)]
