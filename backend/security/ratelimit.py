"""Fixed-window rate limits in Redis: failed logins per client address (and user name),
submissions, token mints and webhook creations per user."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import time
from collections.abc import Sequence

import redis
from fastapi import HTTPException, Request, status
from starlette.datastructures import Headers
from starlette.types import Scope

from backend.config import IPNetwork, Settings
from backend.deployment_keys import keys_of

log = logging.getLogger(__name__)


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


def hit(client: redis.Redis, key: str, window: int, cost: int = 1) -> int:
    """Count cost requests in the current window and return the window's count."""
    slot = keys_of(client).name(f"tb:ratelimit:{key}:{int(time.time() // window)}")
    pipe = client.pipeline()
    pipe.incrby(slot, cost)
    pipe.expire(slot, window * 2)
    count, _ = pipe.execute()
    return int(count)


def give_back(client: redis.Redis, key: str, window: int, cost: int) -> None:
    """Uncount cost requests of the current window (a refused batch spends nothing)."""
    client.decrby(keys_of(client).name(f"tb:ratelimit:{key}:{int(time.time() // window)}"), cost)


def _retry_after(window: int) -> str:
    return str(window - int(time.time()) % window)


def count_against(
    request: Request,
    settings: Settings,
    *,
    bucket: str,
    user_id: int,
    limit: int,
    cost: int = 1,
    what: str = "requests",
) -> None:
    """429 once the user exceeds limit in this window (every token and session of theirs).

    A request worth several (a sweep's trials) is refused whole, and then spends nothing."""
    client: redis.Redis | None = getattr(request.app.state, "redis", None)
    if client is None:
        return
    window = settings.rate_window_seconds
    key = f"{bucket}:user:{user_id}"
    try:
        count = hit(client, key, window, cost)
        if count > limit and cost > 1:
            give_back(client, key, window, cost)
    except redis.RedisError as err:
        log.warning("rate limit not enforced, Redis unavailable: %s", err)
        return
    if count > limit:
        left = max(0, limit - (count - cost))
        detail = f"too many {what}: at most {limit} per {window} s"
        if cost > 1:
            detail += f"; this one is {cost}, {left} left in this window"
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail,
            headers={"Retry-After": _retry_after(window)},
        )


def spend_submissions(request: Request, settings: Settings, user_id: int, n: int) -> None:
    """Count n submissions (a sweep's trials) against the user's submit limit, all or none."""
    limit = settings.submit_rate_limit
    what = "submissions (each sweep trial is one)"
    count_against(
        request,
        settings,
        bucket="submit",
        user_id=user_id,
        limit=limit,
        cost=n,
        what=what,
    )


class LoginGate:
    """Failed logins, counted per client address (tokens) or address and user name
    (passwords), in the login limit's window.

    Only failures count and a valid API token always logs in: tokens are 256-bit
    random, so answering whether one is valid helps no guesser, and a job flooding the
    login from the API host's loopback locks no other loopback client out. Password
    guesses for one user name from one address stop being checked (429) once that
    pair has failed `login_rate_limit` times in the window; other users and tokens are
    unaffected. Redis being away lets logins through unlimited, as every limit here does.
    """

    def __init__(self, request: Request, settings: Settings) -> None:
        self.client: redis.Redis | None = getattr(request.app.state, "redis", None)
        self.window, self.limit = settings.rate_window_seconds, settings.login_rate_limit
        address = client_address(request.scope, settings.trusted_proxy_networks)
        self.prefix = f"login-failed:ip:{address}"

    def _key(self, username: str | None) -> str:
        if username is None:
            return f"{self.prefix}:token"
        return f"{self.prefix}:user:{hashlib.sha256(username.lower().encode()).hexdigest()[:32]}"

    def _refusal(self) -> HTTPException:
        return HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many failed logins: at most {self.limit} per {self.window} s",
            headers={"Retry-After": _retry_after(self.window)},
        )

    def check_password_guess(self, username: str) -> None:
        """429, before the password is checked, once this address and user name are spent."""
        if self.client is None:
            return
        slot = keys_of(self.client).name(
            f"tb:ratelimit:{self._key(username)}:{int(time.time() // self.window)}"
        )
        try:
            failed = int(self.client.get(slot) or 0)
        except redis.RedisError as err:
            log.warning("login limit not enforced, Redis unavailable: %s", err)
            return
        if failed >= self.limit:
            raise self._refusal()

    def failed(self, username: str | None) -> None:
        """Count a failed login; 429 (instead of 401) once past the limit."""
        if self.client is None:
            return
        try:
            count = hit(self.client, self._key(username), self.window)
        except redis.RedisError as err:
            log.warning("login limit not enforced, Redis unavailable: %s", err)
            return
        if count > self.limit:
            raise self._refusal()
