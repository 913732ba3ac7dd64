"""A checkpoint counts only when every rank's shard is where rank 0 sees it (#23).

Two gloo ranks whose checkpoint directories differ are two nodes that do not share a
run root: rank 0 must refuse to complete the checkpoint (no step dir, no metadata)
instead of recording one that cannot be resumed.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from workers.contract.checkpoints import complete_checkpoints

pytestmark = pytest.mark.slow  # starts two rank processes


def _rank(rank: int, dirs: list[str], store: str, results: multiprocessing.Queue) -> None:
    import torch
    import torch.distributed as dist

    from workers.rank.engine import checkpoint
    from workers.rank.engine.errors import CheckpointIncomplete

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    try:
        checkpoint.save(
            Path(dirs[rank]), model=model, optimizer=optimizer, progress={"step": 3},
            keep_last=0, tag="attempt-1",
        )  # fmt: skip
        results.put((rank, "saved"))
    except CheckpointIncomplete as failure:
        results.put((rank, failure.reason))


def _save_from_two_ranks(dirs: list[Path], tmp: Path) -> dict[int, str]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    ranks = [
        context.Process(target=_rank, args=(r, [str(d) for d in dirs], str(tmp / "store"), results))
        for r in range(2)
    ]
    for process in ranks:
        process.start()
    outcome = dict(results.get(timeout=120) for _ in ranks)
    for process in ranks:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
    return outcome


def test_a_shared_directory_gets_a_complete_checkpoint(tmp_path: Path) -> None:
    shared = tmp_path / "checkpoints"
    assert _save_from_two_ranks([shared, shared], tmp_path) == {0: "saved", 1: "saved"}
    assert [p.name for p in complete_checkpoints(shared)] == ["step-3"]


def test_directories_not_shared_leave_no_checkpoint_and_say_why(tmp_path: Path) -> None:
    on_a, on_b = tmp_path / "a" / "checkpoints", tmp_path / "b" / "checkpoints"
    outcome = _save_from_two_ranks([on_a, on_b], tmp_path)
    assert "incomplete" in outcome[0] and "__1_0.distcp" in outcome[0], outcome
    assert "do not share their run root" in outcome[0]
    assert complete_checkpoints(on_a) == [] and not (on_a / "step-3").exists()
