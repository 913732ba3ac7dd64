"""422 answers that can always be written: a non-finite number in the echoed input is text."""

from __future__ import annotations

import math
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.responses import JSONResponse


def finite(value: Any) -> Any:
    """The value with every non-finite float replaced by its name ('inf', '-inf', 'nan')."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, except that `1e999` (read as infinity) is echoed as 'inf', not a 500."""
    assert isinstance(exc, RequestValidationError)
    detail = finite(jsonable_encoder(exc.errors()))
    return JSONResponse({"detail": detail}, status_code=422)
