"""A crafted pickle planted anywhere in a checkpoint is refused on resume; nothing of it runs."""

from __future__ import annotations

import contextlib
import json
import pickle
import shutil
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import torch

from tests.security.pickle_payloads import PAYLOADS, extension_codes
from workers.contract.spec import JobSpec
from workers.rank.engine.dcp_json import CheckpointRefused
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer

SHARD = "__0_0.distcp"


def _trainer(checkpoint_dir: Path) -> Trainer:
    spec = JobSpec.model_validate(
        {
            "name": "victim",
            "template": "mlp",
            "parallelism": {"devices": 1},
            "hyperparameters": {"steps": 2, "batch_size": 8, "dataset_size": 64, "hidden": 8},
        }
    )
    task = build_task("mlp", spec.hyperparameters)
    return Trainer(spec, task, ParallelContext(), checkpoint_dir=checkpoint_dir)


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real checkpoint of a trained step, written by the engine."""
    trainer = _trainer(tmp_path_factory.mktemp("job") / "checkpoints")
    trainer.train_step()
    path = trainer.save()
    assert path is not None
    return path


@pytest.fixture
def checkpoint(saved_checkpoint: Path, tmp_path: Path) -> Path:
    """A copy of the real checkpoint to plant payloads in."""
    return Path(shutil.copytree(saved_checkpoint, tmp_path / "checkpoints" / "step-1"))


@pytest.fixture(autouse=True)
def _registered_extensions() -> Iterator[None]:
    with extension_codes():
        yield


def _marker(tmp_path: Path, form: str) -> Path:
    return tmp_path / ("ran-" + "".join(c if c.isalnum() else "_" for c in form))


def _point_entry_at(checkpoint: Path, payload: bytes, *, fqn: str) -> None:
    """Append payload to the shard and point the metadata's storage of `fqn` at it."""
    shard = checkpoint / SHARD
    at = shard.stat().st_size
    shard.write_bytes(shard.read_bytes() + payload)
    doc = json.loads((checkpoint / ".metadata").read_bytes())
    (entry,) = [s for s in doc["storage_data"] if s["fqn"] == fqn]
    entry.update(at=at, length=len(payload))
    (checkpoint / ".metadata").write_text(json.dumps(doc))


def _resume(checkpoint: Path) -> None:
    _trainer(checkpoint.parent).resume(checkpoint)


@pytest.mark.parametrize("form", sorted(PAYLOADS))
def test_each_payload_really_runs_when_unpickled(form: str, tmp_path: Path) -> None:
    """The control: every payload below does run its command under a plain unpickler."""
    marker = _marker(tmp_path, form)
    with contextlib.suppress(pickle.UnpicklingError):
        pickle.loads(PAYLOADS[form](marker))
    assert marker.exists()


def _as_metadata(checkpoint: Path, payload: bytes) -> None:
    # a pickle is read by the static reader (tests/security/test_legacy_checkpoints.py)
    (checkpoint / ".metadata").write_bytes(payload)


def _as_the_whole_shard(checkpoint: Path, payload: bytes) -> None:
    (checkpoint / SHARD).write_bytes(payload)


LR = "optim.param_groups.0.0.weight.lr"

#: where a payload is planted, and what the refusal of the checkpoint says
PLACES: dict[str, tuple[Callable[[Path, bytes], None], str]] = {
    "metadata": (_as_metadata, r"\.metadata is (a pickle that |not JSON)"),
    "a-hyperparameter-value": (
        partial(_point_entry_at, fqn=LR),
        rf"the value of {LR} is (a pickle|not JSON)",
    ),
    "tensor-bytes": (
        partial(_point_entry_at, fqn="model.0.0.weight"),
        r"model\.0\.0\.weight holds \d+ bytes, not a",
    ),
    "the-whole-shard": (_as_the_whole_shard, "shorter than its metadata says"),
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("form", sorted(PAYLOADS))
def test_a_payload_planted_there_is_refused_unexecuted(
    form: str, place: str, checkpoint: Path, tmp_path: Path
) -> None:
    plant, refusal = PLACES[place]
    marker = _marker(tmp_path, form)
    plant(checkpoint, PAYLOADS[form](marker))
    with pytest.raises(CheckpointRefused, match=refusal):
        _resume(checkpoint)
    assert not marker.exists()


def test_metadata_may_not_point_at_a_file_outside_the_checkpoint(
    checkpoint: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(torch.ones(1000).numpy().tobytes())
    doc = json.loads((checkpoint / ".metadata").read_bytes())
    for entry in doc["storage_data"]:
        entry["file"] = f"../../{secret.name}"
    (checkpoint / ".metadata").write_text(json.dumps(doc))
    with pytest.raises(CheckpointRefused, match=r"file must be a data file of this checkpoint"):
        _resume(checkpoint)


def test_trusted_code_never_unpickles() -> None:
    """No torch.load or pickle load in the engine, worker or backend: there is nothing to allow."""
    root = Path(__file__).resolve().parents[2]
    found = [
        f"{path.relative_to(root)}: {needle}"
        for folder in ("workers", "backend")
        for path in (root / folder).rglob("*.py")
        for needle in ("torch.load(", "pickle.load", "import pickle", "Unpickler", "cloudpickle")
        if needle in path.read_text()
    ]
    assert found == []
