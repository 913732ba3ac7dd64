"""Fixed-window rate limits in Redis: logins per client address, submissions and tokens per user."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import anyio
import redis
from fastapi import Depends, HTTPException, Request, status
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.auth.service import Principal
from backend.config import IPNetwork, Settings
from backend.deployment_keys import keys_of
from backend.deps import ReaderDep, SettingsDep, SubmitterDep

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rule:
    """At most `limit` requests `method path` per window, counted per client address."""

    bucket: str
    method: str
    path: str
    limit: int


def rules_from(settings: Settings) -> list[Rule]:
    """The limits counted before authentication (per address)."""
    return [Rule("login", "POST", "/api/login", settings.login_rate_limit)]


def _trusted(address: str, proxies: Sequence[IPNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(scope: Scope, proxies: Sequence[IPNetwork]) -> str:
    """The caller's address: the peer's, or, from a trusted proxy, the first untrusted hop.

    X-Forwarded-For is read right to left (each proxy appends the address it saw), so
    entries a client wrote itself, on the left, are never reached while a hop is untrusted.
    """
    address: str = (scope.get("client") or ("unknown", 0))[0]
    if not _trusted(address, proxies):
        return address
    forwarded = ",".join(Headers(scope=scope).getlist("x-forwarded-for"))
    for hop in reversed([h.strip() for h in forwarded.split(",") if h.strip()]):
        address = hop
        if not _trusted(hop, proxies):
            break
    return address[:64]


def hit(client: redis.Redis, key: str, window: int) -> int:
    """Count one request in the current window and return the window's count."""
    slot = keys_of(client).name(f"tb:ratelimit:{key}:{int(time.time() // window)}")
    pipe = client.pipeline()
    pipe.incr(slot)
    pipe.expire(slot, window * 2)
    count, _ = pipe.execute()
    return int(count)


def _retry_after(window: int) -> str:
    return str(window - int(time.time()) % window)


class RateLimit:
    """429 with Retry-After once an address exceeds a rule; Redis being away lets requests pass."""

    def __init__(
        self, app: ASGIApp, *, rules: list[Rule], window: int, proxies: Sequence[IPNetwork] = ()
    ) -> None:
        self.app, self.rules, self.window, self.proxies = app, rules, window, proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rule = self._rule(scope)
        client = getattr(scope["app"].state, "redis", None) if rule else None
        if rule is None or client is None:
            return await self.app(scope, receive, send)
        key = f"{rule.bucket}:ip:{client_address(scope, self.proxies)}"
        try:
            count = await anyio.to_thread.run_sync(hit, client, key, self.window)
        except redis.RedisError as err:
            log.warning("rate limit not enforced, Redis unavailable: %s", err)
            return await self.app(scope, receive, send)
        if count > rule.limit:
            refusal = JSONResponse(
                {"detail": f"too many requests: at most {rule.limit} per {self.window} s"},
                status_code=429,
                headers={"Retry-After": _retry_after(self.window)},
            )
            return await refusal(scope, receive, send)
        await self.app(scope, receive, send)

    def _rule(self, scope: Scope) -> Rule | None:
        if scope["type"] != "http":
            return None
        path = scope["path"].rstrip("/") or "/"
        return next((r for r in self.rules if r.method == scope["method"] and r.path == path), None)


def count_against(
    request: Request, settings: Settings, *, bucket: str, user_id: int, limit: int
) -> None:
    """429 once the user exceeds limit in this window (every token and session of theirs)."""
    client: redis.Redis | None = getattr(request.app.state, "redis", None)
    if client is None:
        return
    window = settings.rate_window_seconds
    try:
        count = hit(client, f"{bucket}:user:{user_id}", window)
    except redis.RedisError as err:
        log.warning("rate limit not enforced, Redis unavailable: %s", err)
        return
    if count > limit:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many requests: at most {limit} per {window} s",
            headers={"Retry-After": _retry_after(window)},
        )


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


SubmissionDep = Annotated[Principal, Depends(_submission)]
MintingDep = Annotated[Principal, Depends(_minting)]
