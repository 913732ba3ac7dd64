"""`trainboard sweep start|ls|show|cancel` against the API in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.backend.test_sweeps_api import sweep_body
from tests.security.test_cli_admin import run  # noqa: F401  (the fixture)


def test_start_show_and_cancel_a_sweep_from_the_command_line(
    run: Any,  # noqa: F811
    tokens: dict[str, str],
    tmp_path: Path,
) -> None:
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps(sweep_body()))
    started = run(tokens["alice"], "sweep", "start", str(config))
    assert started.exit_code == 0, started.output
    assert "sweep 1 running: lr-search (4 trials, 2 at once, min loss)" in started.output
    shown = run(tokens["alice"], "sweep", "show", "1")
    lines = shown.output.splitlines()
    assert lines[1].split()[:5] == ["#1", "job", "1", "queued", "step"]
    assert lines[3].split()[:4] == ["#3", "job", "-", "pending"] and "lr=1e-06" in lines[3]
    listed = run(tokens["alice"], "sweep", "ls")
    assert "running     0/4" in listed.output
    cancelled = run(tokens["alice"], "sweep", "cancel", "1")
    assert cancelled.exit_code == 0 and "sweep 1 cancelled" in cancelled.output
    again = run(tokens["alice"], "sweep", "cancel", "1")
    assert again.exit_code == 2 and "refused: sweep 1 is cancelled" in again.output


def test_a_refused_sweep_names_the_field(run: Any, tokens: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    config = tmp_path / "sweep.yaml"
    config.write_text("name: x\nbase: {name: x, template: mlp}\nparameters: {}\n")
    refused = run(tokens["alice"], "sweep", "start", str(config))
    assert refused.exit_code == 2 and "parameters" in refused.output
