"""A checkpoint's metadata is checked against what it describes before anything is allocated
from it: a real checkpoint passes; every oversized shape, offset, length or index is refused."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backend.checkpoint.bounds import MetadataRefused, check_checkpoint, check_metadata
from tests.small_checkpoints import small_checkpoints
from workers.contract.checkpoints import checkpoint_path


@pytest.fixture(scope="module")
def step_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real checkpoint of a small model and its SGD state, as the engine writes it."""
    directory = tmp_path_factory.mktemp("checkpoints")
    small_checkpoints(directory, (1,))
    return checkpoint_path(directory, 1)


def _files(step_dir: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in step_dir.iterdir() if f.name != ".metadata"}


def test_a_real_checkpoint_passes(step_dir: Path) -> None:
    check_checkpoint(step_dir)


def _weight(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["state_dict_metadata"]["model.0.weight"]


def _storage(doc: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in doc["storage_data"] if s["fqn"] == "model.0.weight")


CRAFTED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a list index past the entries": (
        lambda d: d["planner_data"].update({"model.0.weight": ["model", 10**9]}),
        "has list index 1000000000",
    ),
    "a tensor larger than the shards": (
        lambda d: _weight(d).update(size=[2**20, 2**20], chunks=[]),
        "is a tensor of",
    ),
    "a chunk outside its tensor": (
        lambda d: _weight(d)["chunks"][0].update(offsets=[8, 0]),
        "lies outside its shape",
    ),
    "a chunk of the wrong rank": (
        lambda d: _weight(d)["chunks"][0].update(offsets=[0], sizes=[8]),
        "dimensions",
    ),
    "storage past the end of its file": (
        lambda d: _storage(d).update(at=10**12),
        "past the end",
    ),
    "storage in a file it does not hold": (
        lambda d: _storage(d).update(file="__9_0.distcp"),
        "names a file",
    ),
    "storage at an offset no chunk has": (
        lambda d: _storage(d).update(offset=[4, 0]),
        "none of its chunks has",
    ),
    "a chunk hint past the chunks": (
        lambda d: _storage(d).update(index=10**9),
        "names chunk",
    ),
    "a negative size": (lambda d: _weight(d).update(size=[-1, 4]), "non-negative"),
    "too many dimensions": (lambda d: _weight(d).update(size=[1] * 65), "dimensions"),
    "a path too deep": (
        lambda d: d["planner_data"].update({"model.0.weight": ["x"] * 65}),
        "deeper than",
    ),
}


@pytest.mark.parametrize("crafted", CRAFTED)
def test_crafted_metadata_is_refused(step_dir: Path, crafted: str) -> None:
    change, why = CRAFTED[crafted]
    document = copy.deepcopy(json.loads((step_dir / ".metadata").read_bytes()))
    change(document)
    with pytest.raises(MetadataRefused, match=why):
        check_metadata(document, file_sizes=_files(step_dir))


def test_a_pickle_or_a_huge_metadata_file_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / ".metadata").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(MetadataRefused, match="pickle"):
        check_checkpoint(tmp_path)
    with open(tmp_path / ".metadata", "wb") as sparse:
        sparse.truncate(65 << 20)
    with pytest.raises(MetadataRefused, match="larger than"):
        check_checkpoint(tmp_path)
