"""Whether a Redis is closed to job code: the commands that run jobs refuse one that is not.

Ranks run job code on the same hosts as the worker (and, with `trainboard up`, the API). A
Redis that answers without credentials is a control channel for every job: it lists the
deployment's keys, reads other users' logs, takes forged health events and stop requests.
`trainboard up` and `trainboard worker` therefore start only on a Redis that asks for
credentials, and check that it really does (an unauthenticated PING to the same address
must be refused), or on a unix socket that no other user can reach.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis

#: TRAINBOARD_REDIS_URL's value for "start a private Redis of this deployment's own"
PRIVATE = "private"
_TCP_SCHEMES = ("redis", "rediss")
HOW_TO_FIX = (
    "To fix: leave TRAINBOARD_REDIS_URL unset (or 'private') and `trainboard up` starts a "
    "private Redis on a unix socket, or give a Redis that requires a password and put it in "
    "the URL: "
    "redis://:PASSWORD@HOST:6379/0 or an ACL user, redis://USER:PASSWORD@HOST:6379/0 "
    "(docs/security.md, 'Redis: no control channel for jobs')"
)


class OpenRedis(ValueError):
    """A Redis that job code could use without credentials."""


def is_private(url: str) -> bool:
    """Whether the URL asks for a private Redis of this deployment's own."""
    return url.strip() in ("", PRIVATE)


def refuse_open_redis(url: str, *, timeout: float = 2.0) -> None:
    """Raise OpenRedis, saying why and how to fix it, unless only credential holders reach url.

    A TCP URL must carry a password (or ACL user and password), and the server must refuse a
    client without it; a unix socket must be out of other users' reach or carry a password
    the server insists on. A Redis that does not answer is left to the caller.
    """
    parts = urlsplit(url)
    password = _password(parts)
    if parts.scheme in _TCP_SCHEMES:
        if not password:
            raise OpenRedis(
                f"TRAINBOARD_REDIS_URL {shown_url(url)} carries no password: every job on a host "
                f"that reaches {parts.hostname}:{parts.port or 6379} could read and forge this "
                f"deployment's messages and stop other users' jobs. {HOW_TO_FIX}"
            )
    elif parts.scheme == "unix":
        if not password and _others_reach(Path(unquote(parts.path))):
            raise OpenRedis(
                f"TRAINBOARD_REDIS_URL {shown_url(url)}: the socket is reachable by other users "
                "(every directory above it searchable and the socket writable by others) and "
                "the URL carries no password, so job users could connect. Keep the socket in a "
                f"directory only the service user can enter (mode 0700). {HOW_TO_FIX}"
            )
    else:
        raise OpenRedis(
            f"TRAINBOARD_REDIS_URL {shown_url(url)}: unknown scheme {parts.scheme!r} "
            "(redis://, rediss:// or unix://)"
        )
    if password and _answers_anonymously(parts, timeout):
        raise OpenRedis(
            f"the Redis at {shown_url(url)} answers a client that gives no password: it has no "
            "requirepass and its default user needs none, so the password in the URL protects "
            "nothing and every job could use it too. Set requirepass (or `ACL SETUSER default "
            f"off`) on that server. {HOW_TO_FIX}"
        )


def _answers_anonymously(parts: SplitResult, timeout: float) -> bool:
    """Whether the server behind the URL answers PING to a client with no credentials."""
    netloc = parts.netloc.rsplit("@", 1)[-1]  # the same host and port, no user or password
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("username", "password")]
    anonymous = urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))
    client = redis.Redis.from_url(anonymous, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        return bool(client.ping())
    except redis.AuthenticationError:
        return False  # NOAUTH: the server insists on credentials
    except redis.ResponseError:
        return False  # e.g. NOPERM: the default user may not even PING
    except (redis.ConnectionError, redis.TimeoutError):
        return False  # unreachable: whether it answers at all is the caller's check
    finally:
        client.close()


def _password(parts: SplitResult) -> str | None:
    """The password a redis-py URL gives, in its user part or as ?password=."""
    return parts.password or dict(parse_qsl(parts.query)).get("password")


def _others_reach(socket_path: Path) -> bool:
    """Whether a user other than the owner could connect to a unix socket (search + write)."""
    try:
        info = socket_path.stat()
    except OSError:
        return False  # not there (yet): whether it answers is the caller's check
    if not info.st_mode & stat.S_IWOTH:
        return False
    return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in socket_path.parents)


def shown_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    parts = urlsplit(url)
    if _password(parts):
        query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)]
        parts = parts._replace(query=urlencode(query, safe="*"))
    if not parts.password:
        return urlunsplit(parts)
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
