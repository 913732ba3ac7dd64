"""What a job ran, as the node sends it to the control plane (one shape for both sides)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

MAX_DIFF_BYTES = 64 * 1024
MAX_PACKAGES = 2000
#: notes of the limits a tree met that are kept ("file x skipped: ..."), then one summary
MAX_LIMIT_NOTES = 20


class GitState(BaseModel):
    toplevel: str = Field(max_length=4096)
    commit: str = Field(max_length=64)
    branch: str | None = Field(None, max_length=256)
    dirty: bool
    diff: str = Field("", max_length=MAX_DIFF_BYTES + 200, description="git diff HEAD, capped")
    diff_truncated: bool = False
    diff_note: str | None = Field(
        None, max_length=600, description="why the diff is cut or missing: the limit it met"
    )


class ScriptTree(BaseModel):
    root: str = Field(max_length=4096, description="the script root on the node's PYTHONPATH")
    entrypoint: str = Field(max_length=4096)
    sha256: str = Field(max_length=64, description="over every file's path and bytes, sorted")
    files: int
    bytes: int
    complete: bool = Field(description="False when a limit left anything unread")
    limits: list[Annotated[str, Field(max_length=600)]] = Field(
        default_factory=list,
        max_length=MAX_LIMIT_NOTES + 1,
        description="each limit met: a file skipped (its size, the per-file cap), the tree cut",
    )
    git: GitState | None = None


class Recorded(BaseModel):
    """Read by the node (as root, no user code run): what was handed to the ranks."""

    template: str | None = Field(None, max_length=64)
    script: ScriptTree | None = None
    trainboard: str | None = Field(None, max_length=64, description="the worker's git commit")
    node: str = Field(max_length=64)


class Reported(BaseModel):
    """Printed by the ranks' interpreter, run as the job's user: as reported by the job."""

    python: str = Field(max_length=256)
    executable: str = Field(max_length=4096)
    torch: str | None = Field(None, max_length=64)
    cuda: str | None = Field(None, max_length=64)
    packages: list[str] = Field(default_factory=list, max_length=MAX_PACKAGES)


class ProvenanceIn(BaseModel):
    recorded: Recorded
    reported: Reported | None = None
    reported_error: str | None = Field(None, max_length=1000)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
