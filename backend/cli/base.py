"""The `trainboard` Typer app, its API URL and token options, and how commands fail."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from backend.cli.client import ApiError, Client

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Trainboard: train on your GPUs."
)

#: the job a command acts on
JobId = Annotated[int, typer.Argument(min=1)]


@dataclass(frozen=True)
class Api:
    """Where the API is and the token to call it with (from flags or the environment)."""

    url: str
    token: str


@app.callback()
def options(
    ctx: typer.Context,
    api_url: Annotated[
        str, typer.Option(envvar="TRAINBOARD_API_URL", help="Trainboard's URL")
    ] = "http://127.0.0.1:8000",
    token: Annotated[
        str, typer.Option(envvar="TRAINBOARD_TOKEN", help="API token", show_default=False)
    ] = "",
) -> None:
    """Trainboard: train on your GPUs."""
    ctx.obj = Api(url=api_url, token=token)


def connect(ctx: typer.Context) -> Client:
    """A client of the API the command line names; exits with a hint when no token is set."""
    api: Api = ctx.find_root().obj
    if not api.token:
        fail("no API token: pass --token or set TRAINBOARD_TOKEN (printed by `trainboard up`)")
    return _Reporting(api.url, api.token)


class _Reporting(Client):
    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return super().call(method, path, **kwargs)
        except ApiError as err:
            prefix = {
                401: "not authenticated",
                404: "not found",
                422: "invalid spec",
                409: "refused",
            }
            fail(
                f"{prefix.get(err.status, 'error')}:\n{err}"
                if err.status == 422
                else f"{prefix.get(err.status, 'error')}: {err}"
            )


def fail(message: str) -> Any:
    """Print the message on stderr and exit with status 2."""
    typer.echo(message, err=True)
    raise typer.Exit(2)


def read_mapping(path: Path, what: str) -> Any:
    """A YAML or JSON file holding a mapping (what: 'a job spec'), or exit naming the fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        fail(f"cannot read {path}: {err}")
    try:
        spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as err:
        fail(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {err}")
    if not isinstance(spec, dict):
        fail(f"{path} must hold a mapping ({what}), not {type(spec).__name__}")
    return spec
