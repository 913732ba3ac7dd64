"""How the services' refusals answer over HTTP: one table, installed as app-level handlers.

Services raise their own exceptions (a job not found, a transition the table refuses);
routers let them pass, and the app answers `{"detail": <message>}` with the status here.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from starlette.responses import JSONResponse

from backend.auth.tokens import NodeNameRequired, ScopeRefused, TokenNotFound
from backend.auth.users import UserExists, UserNotFound
from backend.checkpoint.consolidate import ConsolidationFailed
from backend.checkpoint.service import CheckpointNotFound
from backend.jobs.attempts import AttemptNotFound, PortRefused
from backend.jobs.service import JobNotFound, NothingToResume, SpecRefused
from backend.jobs.states import IllegalTransition
from backend.nodes.service import NodeNotFound
from backend.nodes.trust import NotThisNode
from backend.security.errors import validation_error
from backend.sweeps.service import SweepNotFound
from backend.webhooks.service import WebhookNotFound, WebhookRefused

STATUS_OF: dict[type[Exception], int] = {
    JobNotFound: status.HTTP_404_NOT_FOUND,
    AttemptNotFound: status.HTTP_404_NOT_FOUND,
    NodeNotFound: status.HTTP_404_NOT_FOUND,
    UserNotFound: status.HTTP_404_NOT_FOUND,
    TokenNotFound: status.HTTP_404_NOT_FOUND,
    WebhookNotFound: status.HTTP_404_NOT_FOUND,
    SweepNotFound: status.HTTP_404_NOT_FOUND,
    CheckpointNotFound: status.HTTP_404_NOT_FOUND,
    ConsolidationFailed: status.HTTP_422_UNPROCESSABLE_CONTENT,
    WebhookRefused: status.HTTP_422_UNPROCESSABLE_CONTENT,
    IllegalTransition: status.HTTP_409_CONFLICT,
    NothingToResume: status.HTTP_409_CONFLICT,
    UserExists: status.HTTP_409_CONFLICT,
    ScopeRefused: status.HTTP_403_FORBIDDEN,
    NotThisNode: status.HTTP_403_FORBIDDEN,
}


async def refusal(request: Request, exc: Exception) -> JSONResponse:
    """The status of the refusal's kind, its message as the detail."""
    code = next(code for kind, code in STATUS_OF.items() if isinstance(exc, kind))
    return JSONResponse({"detail": str(exc)}, status_code=code)


async def refused_field(request: Request, exc: Exception) -> JSONResponse:
    """A 422 naming the body field a refusal is about, shaped like a refused body's."""
    loc = exc.loc if isinstance(exc, SpecRefused | PortRefused) else ("node",)
    error = {"loc": ("body", *loc), "msg": str(exc), "type": "value_error", "input": None}
    return await validation_error(request, RequestValidationError([error]))


def install(app: FastAPI) -> None:
    """Answer every refusal of STATUS_OF, and the field refusals, raised by a route."""
    for kind in STATUS_OF:
        app.add_exception_handler(kind, refusal)
    for kind in (SpecRefused, NodeNameRequired, PortRefused):
        app.add_exception_handler(kind, refused_field)
