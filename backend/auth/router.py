"""Login, logout, who-am-I, users (admin) and the caller's API tokens."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status

from backend.auth import service, tokens, users
from backend.auth.deps import (
    SESSION_COOKIE,
    AdminDep,
    MintingDep,
    ObjectId,
    ReaderDep,
    SessionDep,
    SettingsDep,
    credentials_from,
    refuse_cross_site,
)
from backend.auth.models import ApiToken, User
from backend.auth.schemas import (
    LoginIn,
    Me,
    PasswordIn,
    SessionOut,
    TokenCreated,
    TokenIn,
    TokenOut,
    UserIn,
    UserOut,
)
from backend.auth.service import Principal
from backend.security.ratelimit import LoginGate

router = APIRouter(prefix="/api", tags=["auth"])


@router.post("/login", response_model=Me, dependencies=[Depends(refuse_cross_site)])
def login(
    body: LoginIn, request: Request, response: Response, session: SessionDep, settings: SettingsDep
) -> Me:
    """Exchange an API token, or a username and password, for an HttpOnly session cookie;
    failed logins are limited (429), a valid token never is."""
    gate = LoginGate(request, settings)
    if body.token is not None:
        principal = service.authenticate(session, body.token)
    else:
        gate.check_password_guess(body.username or "")
        principal = users.password_login(
            session, username=body.username or "", password=body.password or ""
        )
    if principal is None or "read" not in principal.scopes:
        gate.failed(body.username if body.token is None else None)
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid credentials")
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


@router.get("/session", response_model=SessionOut)
def current_session(request: Request, session: SessionDep) -> SessionOut:
    """Who is signed in, or nobody: 200 either way, so a signed-out page logs no 401."""
    secret, _ = credentials_from(request.headers, request.cookies)
    principal = service.authenticate(session, secret) if secret else None
    signed_in = principal is not None and "read" in principal.scopes
    return SessionOut(user=_me(principal) if principal is not None and signed_in else None)


@router.post("/users", status_code=status.HTTP_201_CREATED, response_model=UserOut)
def create_user(body: UserIn, _: AdminDep, session: SessionDep) -> UserOut:
    """Create a user (admins only); 409 when the username is taken."""
    user = users.create_user(
        session, username=body.username, password=body.password, role=body.role
    )
    return _user(user)


@router.get("/users", response_model=list[UserOut])
def list_users(_: AdminDep, session: SessionDep) -> list[UserOut]:
    return [_user(u) for u in users.list_users(session)]


@router.put("/users/{user_id}/password", status_code=status.HTTP_204_NO_CONTENT)
def reset_password(
    user_id: ObjectId, body: PasswordIn, _: AdminDep, session: SessionDep
) -> Response:
    """Set a user's password (admins only); their browser sessions end."""
    users.set_password(session, user_id=user_id, password=body.password)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/tokens", status_code=status.HTTP_201_CREATED, response_model=TokenCreated)
def create_token(body: TokenIn, principal: MintingDep, session: SessionDep) -> TokenCreated:
    """Mint an API token with scopes the caller holds (node: admins only); shown once."""
    token, secret = tokens.mint(
        session,
        principal=principal,
        scopes=body.scopes,
        name=body.name,
        expires_in=body.expires_in,
        node=body.node,
    )
    return TokenCreated(**_token(token).model_dump(), token=secret)


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(principal: ReaderDep, session: SessionDep) -> list[TokenOut]:
    """The caller's API tokens, newest first, without their secrets."""
    return [_token(t) for t in tokens.list_tokens(session, user_id=principal.user_id)]


@router.delete("/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_token(token_id: ObjectId, principal: ReaderDep, session: SessionDep) -> Response:
    """Revoke one of the caller's tokens (admins: anyone's); 404 for anyone else's."""
    tokens.revoke_token(session, principal=principal, token_id=token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _me(principal: Principal) -> Me:
    return Me(
        id=principal.user_id,
        username=principal.username,
        role=principal.role,
        scopes=sorted(principal.scopes),
    )


def _user(user: User) -> UserOut:
    return UserOut.model_validate(user)


def _token(token: ApiToken) -> TokenOut:
    return TokenOut(
        id=token.id,
        name=token.name,
        prefix=token.prefix,
        scopes=token.scopes.split(","),
        node=token.node_name,
        created_at=token.created_at,
        expires_at=token.expires_at,
        revoked_at=token.revoked_at,
    )
