"""Checkpoints are JSON metadata, raw tensor bytes and JSON values: exact round trips, no pickle."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from worker_helpers import mlp_spec

from workers.rank.engine import dcp_json
from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer


def _trainer(tmp_path: Path, **hyperparameters: Any) -> Trainer:
    spec = mlp_spec(hyperparameters={"steps": 2, **hyperparameters})
    task = build_task("mlp", spec.hyperparameters)
    return Trainer(spec, task, ParallelContext(), checkpoint_dir=tmp_path / "checkpoints")


def test_a_checkpoint_is_json_metadata_and_raw_tensors_and_resumes_exactly(
    tmp_path: Path,
) -> None:
    old = _trainer(tmp_path)
    old.train_step()
    rng = torch.get_rng_state()
    path = old.save()
    assert path is not None
    doc = json.loads((path / ".metadata").read_bytes())
    assert (doc["format"], doc["version"]) == ("trainboard-dcp-json", 1)
    shard = (path / "__0_0.distcp").read_bytes()
    for item in doc["storage_data"]:
        stored = shard[item["at"] : item["at"] + item["length"]]
        entry = doc["state_dict_metadata"][item["fqn"]]
        if entry["kind"] == "bytes":  # hyperparameters: JSON
            json.loads(stored)
        else:  # tensors: their elements, nothing else
            (chunk,) = entry["chunks"]
            itemsize = dcp_json.DTYPES[entry["dtype"]].itemsize
            assert len(stored) == math.prod(chunk["sizes"]) * itemsize

    new = _trainer(tmp_path)
    torch.manual_seed(12345)
    new.resume(path)
    assert new.step == 1
    for mine, theirs in zip(new.optimizer.param_groups, old.optimizer.param_groups, strict=True):
        assert {k: v for k, v in mine.items() if k != "params"} == {
            k: v for k, v in theirs.items() if k != "params"
        }
        assert isinstance(mine["betas"], tuple)
    for p_new, p_old in zip(new.params, old.params, strict=True):
        assert torch.equal(p_new, p_old)
        assert torch.equal(
            new.optimizer.state[p_new]["exp_avg"], old.optimizer.state[p_old]["exp_avg"]
        )
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize(
    "value",
    [None, True, 3, 0.1, -0.0, float("inf"), "x", [1, (2.0, "a")], (0.9, 0.999), {"k": [None]}],
)
def test_non_tensor_values_round_trip_through_json_with_their_types(value: object) -> None:
    back = dcp_json.value_from_json(dcp_json.value_to_json(value), "v")
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)


def test_a_nan_hyperparameter_round_trips() -> None:
    back = dcp_json.value_from_json(dcp_json.value_to_json(float("nan")), "v")
    assert isinstance(back, float) and math.isnan(back)


def test_a_value_json_cannot_express_is_refused_at_save() -> None:
    with pytest.raises(TypeError, match="a PosixPath cannot be checkpointed as JSON"):
        dcp_json.value_to_json(Path("/x"))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"tuple": [1], "dict": {}}', "must be JSON written by Trainboard"),
        (b'{"float": "1e999"}', "must be JSON written by Trainboard"),
        (b"NaN", "non-JSON constant NaN"),
        (b'{"a": 1, "a": 2}', "repeats a key"),
        (b"\xff", "is not JSON"),
    ],
)
def test_a_value_that_is_not_our_json_is_refused(raw: bytes, reason: str) -> None:
    with pytest.raises(dcp_json.CheckpointRefused, match=reason):
        dcp_json.value_from_json(raw, "v")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d.update(format="dcp-pickle"), "is not trainboard-dcp-json version 1"),
        (lambda d: d.update(extra=1), "exactly the keys"),
        (lambda d: d["storage_data"][0].update(file="/etc/passwd"), "a data file of this"),
        (lambda d: d["storage_data"][0].update(at=-1), "a non-negative integer"),
        (lambda d: d["storage_data"][0].update(length=True), "a non-negative integer"),
        (lambda d: d["storage_data"][0].update(length=1 << 60), "shorter than its metadata says"),
        (lambda d: next(iter(d["state_dict_metadata"].values())).update(dtype="os"), "dtype"),
        (lambda d: next(iter(d["state_dict_metadata"].values())).update(kind="obj"), "kind"),
        (lambda d: d["planner_data"].update(x=[{"a": 1}]), "strings and integers"),
    ],
)
def test_metadata_that_is_not_ours_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    trainer = _trainer(tmp_path)
    path = trainer.save()
    assert path is not None
    doc = json.loads((path / ".metadata").read_bytes())
    change(doc)
    (path / ".metadata").write_text(json.dumps(doc))
    with pytest.raises(dcp_json.CheckpointRefused, match=reason):
        trainer.resume(path)
