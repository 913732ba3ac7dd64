"""A checkpoint that is not ours (a crafted pickle) is refused without running anything."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import pytest
import torch
from torch import nn

from workers.rank.engine.checkpoint import SafeReader, load


class _Payload:
    """Unpickling this runs os.system: what an attacker's checkpoint would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _crafted(marker: Path) -> bytes:
    return pickle.dumps(_Payload(marker))


def test_crafted_checkpoint_metadata_is_refused_unexecuted(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    checkpoint = tmp_path / "step-10"
    checkpoint.mkdir()
    (checkpoint / ".metadata").write_bytes(_crafted(marker))
    with pytest.raises(pickle.UnpicklingError, match=r"may not load (posix|os)\.system"):
        SafeReader(checkpoint).read_metadata()
    model = nn.Linear(2, 2)
    with pytest.raises(pickle.UnpicklingError):
        load(checkpoint, model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert not marker.exists()


def test_weights_only_load_refuses_a_crafted_value(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(io.BytesIO(_crafted(marker)), weights_only=True)
    assert not marker.exists()
