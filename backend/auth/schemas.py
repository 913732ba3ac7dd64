"""Shapes of login, identity, users and tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

Scope = Literal["read", "submit", "admin", "node"]
USERNAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
#: the names a node registers under (workers.contract.protocol.NodeRegistration)
NODE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
TEN_YEARS = 10 * 366 * 86400


class Closed(BaseModel):
    """Request bodies refuse unknown keys."""

    model_config = ConfigDict(extra="forbid")


class LoginIn(Closed):
    """Either an API token, or a username and password."""

    token: str | None = Field(None, min_length=1, max_length=256)
    username: str | None = Field(None, min_length=1, max_length=64)
    password: str | None = Field(None, min_length=1, max_length=1024)

    @model_validator(mode="after")
    def _one_way_in(self) -> Self:
        with_token = self.token is not None
        with_password = self.username is not None or self.password is not None
        if with_token == with_password or (
            with_password and None in (self.username, self.password)
        ):
            raise ValueError("give either token, or username and password")
        return self


class Me(BaseModel):
    id: int
    username: str
    role: str
    scopes: list[str]


class SessionOut(BaseModel):
    user: Me | None = Field(description="who this browser is signed in as; None: nobody")


class UserIn(Closed):
    username: str = Field(pattern=USERNAME, description="letters, digits and _.- (max 64)")
    password: str = Field(min_length=10, max_length=1024)
    role: Literal["admin", "user"] = "user"


class PasswordIn(Closed):
    password: str = Field(min_length=10, max_length=1024)


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    username: str
    role: str
    created_at: datetime


class TokenIn(Closed):
    scopes: list[Scope] = Field(min_length=1, max_length=4)
    expires_in: int | None = Field(None, ge=60, le=TEN_YEARS, description="seconds until expiry")
    name: str = Field("", max_length=128, pattern=PRINTABLE)
    node: str | None = Field(
        None, pattern=NODE_NAME, description="node tokens (required): the one node it acts as"
    )

    @model_validator(mode="after")
    def _node_only_for_node_tokens(self) -> Self:
        if self.node is not None and "node" not in self.scopes:
            raise ValueError("node names the node of a node token: ask for the node scope")
        return self


class TokenOut(BaseModel):
    """A token as listed: never its secret."""

    id: int
    name: str
    prefix: str
    scopes: list[str]
    node: str | None = Field(None, description="a node token: the one node it acts as")
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class TokenCreated(TokenOut):
    token: str = Field(description="the secret, shown this once")
