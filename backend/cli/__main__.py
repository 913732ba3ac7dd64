"""`python -m backend.cli ...` is the `trainboard` command."""

from backend.cli.main import app

app()
