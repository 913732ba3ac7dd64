"""Fixed-window rate limits in Redis: logins per client address, submissions per credential."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

import anyio
import redis
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.config import Settings
from backend.deps import SESSION_COOKIE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rule:
    """At most `limit` requests `method path` per window, counted per address or credential."""

    bucket: str
    method: str
    path: str
    limit: int
    per: str  # "address" or "credential"


def rules_from(settings: Settings) -> list[Rule]:
    return [
        Rule("login", "POST", "/api/login", settings.login_rate_limit, "address"),
        Rule("submit", "POST", "/api/jobs", settings.submit_rate_limit, "credential"),
    ]


def caller_key(scope: Scope, per: str) -> str:
    """Who a request counts against: its client address, or a hash of the secret it carries."""
    address = (scope.get("client") or ("unknown", 0))[0]
    if per == "address":
        return f"ip:{address}"
    headers = Headers(scope=scope)
    scheme, _, value = headers.get("authorization", "").partition(" ")
    secret = value.strip() if scheme.lower() == "bearer" else ""
    if not secret:
        cookies = headers.get("cookie", "")
        secret = next(
            (c.split("=", 1)[1] for c in cookies.split("; ") if c.startswith(SESSION_COOKIE + "=")),
            "",
        )
    if not secret:
        return f"ip:{address}"
    return "cred:" + hashlib.sha256(secret.encode()).hexdigest()[:32]


def hit(client: redis.Redis, key: str, window: int) -> int:
    """Count one request in the current window and return the window's count."""
    slot = f"tb:ratelimit:{key}:{int(time.time() // window)}"
    pipe = client.pipeline()
    pipe.incr(slot)
    pipe.expire(slot, window * 2)
    count, _ = pipe.execute()
    return int(count)


class RateLimit:
    """429 with Retry-After once a caller exceeds a rule; Redis being away lets requests pass."""

    def __init__(self, app: ASGIApp, *, rules: list[Rule], window: int) -> None:
        self.app, self.rules, self.window = app, rules, window

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rule = self._rule(scope)
        client = getattr(scope["app"].state, "redis", None) if rule else None
        if rule is None or client is None:
            return await self.app(scope, receive, send)
        key = f"{rule.bucket}:{caller_key(scope, rule.per)}"
        try:
            count = await anyio.to_thread.run_sync(hit, client, key, self.window)
        except redis.RedisError as err:
            log.warning("rate limit not enforced, Redis unavailable: %s", err)
            return await self.app(scope, receive, send)
        if count > rule.limit:
            refusal = JSONResponse(
                {"detail": f"too many requests: at most {rule.limit} per {self.window} s"},
                status_code=429,
                headers={"Retry-After": str(self.window - int(time.time()) % self.window)},
            )
            return await refusal(scope, receive, send)
        await self.app(scope, receive, send)

    def _rule(self, scope: Scope) -> Rule | None:
        if scope["type"] != "http":
            return None
        path = scope["path"].rstrip("/") or "/"
        return next((r for r in self.rules if r.method == scope["method"] and r.path == path), None)
