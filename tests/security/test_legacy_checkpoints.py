"""Checkpoints of an earlier Trainboard (pickled DCP metadata, torch.save shards) resume,
read by a static opcode reader: nothing in them is imported or called, crafted ones are refused.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import shutil
import time
import zipfile
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions

from tests.security.legacy_checkpoint import archive, old_save, plant, stock_metadata
from tests.security.pickle_payloads import PAYLOADS
from tests.security.test_checkpoint_pickle import (  # noqa: F401 - an autouse fixture
    _marker,
    _registered_extensions,
    _trainer,
)
from workers.contract.rank_env import EXIT_FINAL
from workers.rank.engine.__main__ import explain
from workers.rank.engine.dcp_json import CheckpointRefused
from workers.rank.engine.legacy_dcp import metadata_from_pickle, read_archive
from workers.rank.engine.train import Trainer

SHARD = "__0_0.distcp"
VALUE, TENSOR = "optim.param_groups.0.0.weight.lr", "model.0.0.weight"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trainer, Path]:
    """A trainer after one step and the checkpoint the old Trainboard wrote of it."""
    trainer = _trainer(tmp_path_factory.mktemp("job") / "checkpoints")
    trainer.train_step()
    path = old_save(
        trainer.checkpoint_dir or Path(),
        model=trainer.model,
        optimizer=trainer.optimizer,
        progress=trainer.progress(),
    )
    return trainer, path


@pytest.fixture
def legacy(trained: tuple[Trainer, Path], tmp_path: Path) -> Path:
    """A copy of the old checkpoint to resume from or plant payloads in."""
    return Path(shutil.copytree(trained[1], tmp_path / "checkpoints" / "step-1"))


def test_an_old_checkpoint_resumes_with_every_tensor_as_saved(
    trained: tuple[Trainer, Path], legacy: Path
) -> None:
    saved, _ = trained
    assert (legacy / ".metadata").read_bytes()[:2] == b"\x80\x04"  # DCP's pickled Metadata
    assert (legacy / SHARD).read_bytes()[:2] == b"PK"  # items are torch.save archives

    resumed = _trainer(legacy.parent)
    resumed.resume(legacy)

    assert resumed.step == saved.step == 1
    for name, value in saved.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], value), name
    before, after = saved.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for param, values in before["state"].items():
        for key, value in values.items():
            assert torch.equal(after["state"][param][key], value), (param, key)
    resumed.train_step()  # and it goes on: step 2, saved in today's JSON format
    assert resumed.step == 2
    path = resumed.save()
    assert path is not None and (path / ".metadata").read_bytes()[:1] == b"{"


def test_the_static_reader_finds_what_dcp_itself_unpickles(legacy: Path) -> None:
    mine = metadata_from_pickle((legacy / ".metadata").read_bytes())
    stock = stock_metadata(legacy)
    assert mine.state_dict_metadata == stock.state_dict_metadata
    assert mine.storage_data == stock.storage_data
    assert mine.planner_data == stock.planner_data
    assert mine.version == stock.version


@pytest.mark.parametrize("form", sorted(PAYLOADS))
def test_every_payload_is_refused_by_the_static_reader_unexecuted(
    form: str, tmp_path: Path
) -> None:
    """Every way a pickle names a callable, protocol-0 ones included, as metadata and as an item."""
    marker = _marker(tmp_path, form)
    payload = PAYLOADS[form](marker)
    with pytest.raises(CheckpointRefused, match=r"\.metadata is a pickle that "):
        metadata_from_pickle(payload)
    with pytest.raises(CheckpointRefused, match=rf"the value of {TENSOR} is a pickle that "):
        read_archive(archive(payload), TENSOR)
    assert not marker.exists()


def test_a_planted_archive_would_run_under_torch_load(tmp_path: Path) -> None:
    """The control: the archive below is live under an unrestricted torch.load."""
    marker = _marker(tmp_path, "torch.load")
    blob = archive(PAYLOADS["STACK_GLOBAL"](marker), {"version": b"3\n"})
    with contextlib.suppress(Exception):
        torch.load(io.BytesIO(blob), weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("fqn", [VALUE, TENSOR])
@pytest.mark.parametrize("form", sorted(PAYLOADS))
def test_a_payload_in_an_old_shard_is_refused_on_resume_unexecuted(
    form: str, fqn: str, legacy: Path, tmp_path: Path
) -> None:
    marker = _marker(tmp_path, form)
    plant(legacy, fqn, archive(PAYLOADS[form](marker)))
    with pytest.raises(CheckpointRefused, match=rf"the value of {fqn} is a pickle that "):
        _trainer(legacy.parent).resume(legacy)
    assert not marker.exists()


def test_a_bare_pickle_in_place_of_an_archive_is_refused(legacy: Path, tmp_path: Path) -> None:
    marker = _marker(tmp_path, "bare")
    plant(legacy, VALUE, PAYLOADS["STACK_GLOBAL"](marker))
    with pytest.raises(CheckpointRefused, match=rf"{VALUE} is not a torch.save archive"):
        _trainer(legacy.parent).resume(legacy)
    assert not marker.exists()


def _replace_record(blob: bytes, name: str, data: bytes) -> bytes:
    """A copy of a stored zip with one record's bytes replaced."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, data if info.filename == name else src.read(info))
    return out.getvalue()


def test_a_tensor_whose_storage_record_is_short_is_refused() -> None:
    saved = io.BytesIO()
    torch.save(torch.arange(4, dtype=torch.float32), saved)
    found = read_archive(saved.getvalue(), TENSOR)
    assert isinstance(found, torch.Tensor) and torch.equal(found, torch.arange(4.0))
    short = _replace_record(saved.getvalue(), "archive/data/0", bytes(8))
    with pytest.raises(CheckpointRefused, match=r"its storage holds 8 bytes, not 4"):
        read_archive(short, TENSOR)


def test_shared_references_cannot_expand_without_bound() -> None:
    """A value pickle whose memo doubles a tuple 60 times is refused, not walked 2**60 times."""
    nested = b"\x80\x02K\x01"  # PROTO 2, push 1
    for _ in range(60):
        nested += b"q\x00h\x00\x86"  # BINPUT 0, BINGET 0, TUPLE2: (x, x)
    began = time.monotonic()
    with pytest.raises(CheckpointRefused, match="repeats shared parts far beyond its own size"):
        read_archive(archive(nested + b"."), VALUE)
    assert time.monotonic() - began < 5


def test_a_refused_checkpoint_ends_the_rank_as_final(tmp_path: Path) -> None:
    """The rank's exit status tells the control plane that no restart can fix it."""
    assert explain(None, CheckpointRefused("checkpoint refused: crafted")) == EXIT_FINAL


def test_an_older_checkpoint_with_list_shaped_optimizer_state_resumes(
    trained: tuple[Trainer, Path], tmp_path: Path
) -> None:
    """Before optimizer state was keyed by parameter name it was saved as lists: still read."""
    saved, _ = trained
    path = old_save(
        tmp_path / "checkpoints",
        model=saved.model,
        optimizer=saved.optimizer,
        progress=saved.progress(),
        options=StateDictOptions(),
    )
    assert "optim.param_groups.0.params" in stock_metadata(path).state_dict_metadata
    resumed = _trainer(path.parent)
    resumed.resume(path)
    assert resumed.step == saved.step
    before, after = saved.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for param, values in before["state"].items():
        for key, value in values.items():
            assert torch.equal(after["state"][param][key], value), (param, key)
    for name, value in saved.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], value), name


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x80\x02]q\x00h\x00a.", "nested too deeply"),  # a list that holds itself
        (b"\x80\x02}]K\x01s.", "unhashable dict key"),
        (b"\x80\x04\x8c\x08builtins\x8c\x07getattr\x93]]\x86R.", "names builtins.getattr"),
        (b"\x80\x02\x8b\xff\xff\xff\x7f.", "is truncated"),  # a 2 GiB integer, announced
        (b"\x80\x02.", "stops with other than one value"),
        (b"\x80\x02(K\x01.", "stops with other than one value"),
        (b"\x80\x02]}b.", "sets the state of something other than a new DCP metadata"),
        (b"\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00x.", "opcode b'\\\\x96'"),  # BYTEARRAY8
    ],
)
def test_malformed_pickles_are_refused_never_crash(raw: bytes, reason: str) -> None:
    with pytest.raises(CheckpointRefused, match=reason):
        read_archive(archive(raw), VALUE)


def test_old_metadata_passes_the_json_paths_checks(legacy: Path) -> None:
    """A shard outside the checkpoint, named in a real pickled Metadata, is refused as in JSON."""
    metadata = stock_metadata(legacy)
    for info in metadata.storage_data.values():
        info.relative_path = "../../secret"
    (legacy / ".metadata").write_bytes(pickle.dumps(metadata))
    with pytest.raises(CheckpointRefused, match="a data file of this checkpoint"):
        _trainer(legacy.parent).resume(legacy)
