"""The GPU acceptance run's verdict: named checks (passed, failed or skipped), JSON and Markdown.

A skipped check is never a pass: the verdict says why it was skipped ("skipped: no GPU"),
and `passed` is true only when no check failed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["passed", "failed", "skipped"]


@dataclass
class Check:
    name: str
    status: Status
    detail: str = ""


@dataclass
class Verdict:
    """Everything the run found, in the order it found it."""

    mode: Literal["gpu", "dry-run"]
    machine: dict[str, Any] = field(default_factory=dict)
    install: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    overhead: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    wall_s: float = 0.0

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        """Record a check that ran; returns ok."""
        self.checks.append(Check(name, "passed" if ok else "failed", detail))
        return ok

    def skip(self, name: str, why: str) -> None:
        """Record a check that could not run here, and why."""
        self.checks.append(Check(name, "skipped", f"skipped: {why}"))

    def fail(self, name: str, detail: str) -> None:
        self.checks.append(Check(name, "failed", detail))

    @property
    def passed(self) -> bool:
        return not any(c.status == "failed" for c in self.checks) and bool(self.checks)

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in ("passed", "failed", "skipped")}

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        data["counts"] = self.counts()
        return data

    def write(self, out: Path) -> tuple[Path, Path]:
        """verdict.json and verdict.md under out."""
        out.mkdir(parents=True, exist_ok=True)
        self.wall_s = round(time.time() - self.started, 1)
        json_path, md_path = out / "verdict.json", out / "verdict.md"
        json_path.write_text(json.dumps(self.as_json(), indent=2, default=str) + "\n")
        md_path.write_text(self.markdown())
        return json_path, md_path

    def markdown(self) -> str:
        """A short table: one row per check, then the jobs and the overhead."""
        counts = self.counts()
        head = (
            f"**{'PASSED' if self.passed else 'FAILED'}** ({self.mode}): "
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped; "
            f"wall {self.wall_s:.0f} s"
        )
        machine = ", ".join(f"{k}: {v}" for k, v in self.machine.items())
        install = ", ".join(f"{k}: {v}" for k, v in self.install.items())
        lines = [head, "", f"Machine: {machine}", "", f"Install: {install}", ""]
        lines += ["| check | result | detail |", "|---|---|---|"]
        lines += [f"| {c.name} | {c.status} | {_cell(c.detail)} |" for c in self.checks]
        if self.jobs:
            lines += ["", "| job | state | attempts | steps | loss first → last | wall s |"]
            lines += ["|---|---|---|---|---|---|"]
            for job in self.jobs:
                loss = job.get("loss") or ("", "")
                lines.append(
                    f"| {job['name']} | {job['state']} | {job.get('attempts', '')} | "
                    f"{job.get('step', '')} | {_num(loss[0])} → {_num(loss[1])} | "
                    f"{job.get('wall_s', '')} |"
                )
        if self.overhead:
            lines += ["", "| engine overhead | value |", "|---|---|"]
            lines += [f"| {k} | {_cell(str(v))} |" for k, v in self.overhead.items()]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:600]


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
