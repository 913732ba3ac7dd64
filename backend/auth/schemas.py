"""Shapes of login and identity."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LoginIn(BaseModel):
    token: str = Field(min_length=1, max_length=256)


class Me(BaseModel):
    id: int
    username: str
    role: str
    scopes: list[str]
