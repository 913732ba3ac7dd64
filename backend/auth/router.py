"""Login, logout and who-am-I."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from backend.auth import service
from backend.auth.schemas import LoginIn, Me
from backend.auth.service import Principal
from backend.deps import SESSION_COOKIE, ReaderDep, SessionDep, SettingsDep, get_principal

router = APIRouter(prefix="/api", tags=["auth"])


@router.post("/login", response_model=Me)
def login(body: LoginIn, response: Response, session: SessionDep, settings: SettingsDep) -> Me:
    """Exchange an API token for an HttpOnly browser session cookie."""
    principal = service.authenticate(session, body.token)
    if principal is None or "read" not in principal.scopes:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid or expired token")
    secret = service.start_session(session, principal=principal, days=settings.session_days)
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(settings.session_days * 86400),
        httponly=True,
        samesite="lax",
        secure=settings.cookie_secure,
        path="/",
    )
    return _me(principal)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
def logout(principal: ReaderDep, session: SessionDep, response: Response) -> Response:
    """End this browser session (the cookie's token is revoked)."""
    if principal.kind == "session":
        service.revoke(session, token_id=principal.token_id)
    response.status_code = status.HTTP_204_NO_CONTENT
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/me", response_model=Me)
def me(principal: ReaderDep) -> Me:
    return _me(principal)


def _me(principal: Principal) -> Me:
    return Me(
        id=principal.user_id,
        username=principal.username,
        role=principal.role,
        scopes=sorted(principal.scopes),
    )


__all__ = ["router", "get_principal"]
