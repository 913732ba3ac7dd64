"""Out-of-memory recognition and the halved micro-batch shapes (workers/contract/oom.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from workers.contract.oom import recognise, reduced_spec, shape_after
from workers.contract.spec import JobSpec
from workers.supervisor.outcome import attempt_outcome

CUDA_TAIL = """rank 0 exited with 1; last stderr lines:
  File "train.py", line 12, in <module>
    loss = model(x).sum()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB."""


def test_a_scripts_oom_in_its_stderr_tail_is_the_attempts_recognised_reason(
    tmp_path: Path,
) -> None:
    for text in (CUDA_TAIL, "rank 1 exited with 1; last stderr lines:\nMemoryError"):
        outcome = attempt_outcome(
            failed=text,
            stop_reason=None,
            fenced=None,
            platform_fault=False,
            codes=[1],
            checkpoint_dir=tmp_path,
        )
        assert outcome.reason == f"out of memory: {text}"
    assert recognise("rank 0 exited with 1") == "rank 0 exited with 1"
    already = "out of memory: host MemoryError at step 3"
    assert recognise(already) == already


def test_halving_keeps_the_global_batch_and_respects_pipelines_and_bounds() -> None:
    spec = {"hyperparameters": {"batch_size": 32}, "grad_accum": 1}
    shapes = [shape_after(spec, k) for k in (1, 2)]
    assert [(s.batch_size, s.grad_accum) for s in shapes if s] == [(16, 2), (8, 4)]
    assert shape_after({"hyperparameters": {"batch_size": 3}}, 1) is None  # odd: cannot halve
    piped = {"hyperparameters": {"batch_size": 8}, "parallelism": {"microbatches": 8}}
    assert shape_after(piped, 1) is None  # 4 samples cannot split into 8 micro-batches
    reduced = reduced_spec({**spec, "name": "x"}, 1)
    assert reduced["hyperparameters"]["batch_size"] == 16 and reduced["grad_accum"] == 2
    assert reduced_spec(spec, 0) is spec


def test_reduce_microbatch_is_for_template_jobs() -> None:
    health = {"on_oom": "reduce_microbatch"}
    JobSpec.model_validate({"name": "t", "template": "mlp", "health": health})
    with pytest.raises(ValidationError, match="on_oom reduce_microbatch applies to template"):
        JobSpec.model_validate({"name": "s", "entrypoint": {"script": "a.py"}, "health": health})
