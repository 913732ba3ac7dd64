"""Health and the template catalog the submit form is generated from."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from backend.auth.deps import ReaderDep
from workers.contract.catalog import PIPELINE_UNITS, TEMPLATES

router = APIRouter(prefix="/api", tags=["meta"])


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="degraded: the database refuses writes")
    database: str = Field("ok", description='"ok", or why it cannot be written ("disk full")')


class HParamOut(BaseModel):
    name: str
    type: str
    default: Any
    minimum: float | None
    maximum: float | None
    choices: list[str] | None
    help: str


class TemplateOut(BaseModel):
    name: str
    pipeline_unit: str
    hyperparameters: list[HParamOut]


@router.get("/health", response_model=HealthOut)
def health(request: Request) -> HealthOut:
    """Up, and whether the database takes writes (probed again while it does not)."""
    cause = request.app.state.write_health.probe(request.app.state.db)
    return HealthOut(status="ok") if cause is None else HealthOut(status="degraded", database=cause)


@router.get("/templates", response_model=list[TemplateOut])
def templates(_: ReaderDep) -> list[TemplateOut]:
    """Built-in templates with each hyperparameter's type, default and range."""
    return [
        TemplateOut(
            name=name,
            pipeline_unit=PIPELINE_UNITS[name],
            hyperparameters=[
                HParamOut(
                    name=key,
                    type={bool: "boolean", int: "integer", float: "number", str: "string"}[p.kind],
                    default=p.default,
                    minimum=p.minimum,
                    maximum=p.maximum,
                    choices=list(p.choices) if p.choices else None,
                    help=p.help,
                )
                for key, p in params.items()
            ],
        )
        for name, params in TEMPLATES.items()
    ]
