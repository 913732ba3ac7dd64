"""Update modes (#35) on real gloo ranks: the parameter server and local SGD compute what DDP and
one process compute where the arithmetic says they must; async records its staleness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from reference import rank_weights, reference_weights, resume, small_mlp, torchrun

from workers.contract.spec import JobSpec
from workers.rank.engine.data import ShardedBatches
from workers.rank.engine.optim import build_optimizer, lr_at
from workers.rank.engine.templates import build_task

pytestmark = pytest.mark.slow  # starts torchrun ranks

STEPS, EVERY = 6, 3
DRIVER = "update_modes_driver.py"


def spec_for(devices: int, **parallelism: object) -> JobSpec:
    """A small mlp crossing an epoch, with clipping, warmup+cosine and accumulation."""
    return JobSpec.model_validate(
        {
            "name": "update-modes",
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": devices, **parallelism},
            "hyperparameters": small_mlp(STEPS),
            "grad_accum": 2,
            "grad_clip": 0.5,
            "lr_schedule": {"kind": "cosine", "warmup_steps": 2},
            "checkpoint": {"every_steps": EVERY},
        }
    )


def sgd_spec(devices: int, **parallelism: object) -> JobSpec:
    """Momentum SGD without clipping: averaging parameters is then linear in the gradients."""
    hp = {**small_mlp(STEPS), "optimizer": "sgd", "lr": 0.05}
    return JobSpec.model_validate(
        {
            "name": "update-modes-sgd",
            "template": "mlp",
            "parallelism": {"strategy": "data", "devices": devices, **parallelism},
            "hyperparameters": hp,
            "grad_accum": 2,
            "checkpoint": {"every_steps": EVERY},
        }
    )


def trained(spec: JobSpec, out: Path) -> Path:
    out.mkdir()
    torchrun(spec, out, driver=DRIVER)
    return out


def metrics(out: Path, rank: int) -> list[dict[str, Any]]:
    lines = (out / f"rank{rank}-metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def own_steps(out: Path, rank: int, *, dedicated: bool = False) -> int:
    """Steps the rank took: rank 0's are the job's; a worker's, the gradients it sent (its
    rows are keyed by rank 0's step, two in one of rank 0's steps merged, bytes added; a
    dedicated server's workers send their loss, 4 bytes, after each gradient)."""
    rows = metrics(out, rank)
    if rank == 0:
        return len(rows)
    weights = rank_weights(out, 0, max(row["step"] for row in metrics(out, 0)))
    gradient = sum(v.numel() * v.element_size() for v in weights.values()) + 4 * dedicated
    sent = sum(row["bytes_sent"] for row in rows)
    assert sent % gradient == 0, (sent, gradient)
    return int(sent // gradient)


def assert_replicas_identical(
    out: Path, devices: int, steps: tuple[int, ...] = (EVERY, STEPS)
) -> None:
    for step in steps:
        first = rank_weights(out, 0, step)
        for rank in range(1, devices):
            mine = rank_weights(out, rank, step)
            for key, value in first.items():
                assert torch.equal(mine[key], value), f"rank {rank} drifted in {key} at {step}"


def assert_close(weights: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert sorted(weights) == sorted(expected)
    for key, value in expected.items():
        torch.testing.assert_close(weights[key], value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("devices", [2, 3])
def test_sync_parameter_server_matches_allreduce_and_one_process(
    devices: int, tmp_path: Path
) -> None:
    server = trained(spec_for(devices, reduce="parameter_server"), tmp_path / "ps")
    ring = trained(spec_for(devices, reduce="allreduce"), tmp_path / "ring")

    assert_replicas_identical(server, devices)
    reference = reference_weights(spec_for(devices))
    assert_close(rank_weights(server, 0, STEPS), reference)
    assert_close(rank_weights(server, 0, STEPS), rank_weights(ring, 0, STEPS))
    # the server's link carries every worker's gradient in and the weights out, each step
    size = sum(v.numel() * v.element_size() for v in reference.values())
    first = metrics(server, 0)[0]
    assert first["bytes_received"] == (devices - 1) * size
    assert first["bytes_sent"] == (devices - 1) * size
    worker = metrics(server, 1)[0]
    assert worker["bytes_sent"] == size and worker["bytes_received"] == size
    # DDP's all-reduce, counted by its communication hook: the gradient's payload each step
    # on every rank (accumulation's first micro-step does not sync), as comparable numbers
    for rank in range(devices):
        rows = metrics(ring, rank)
        assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
        assert {(row["bytes_sent"], row["bytes_received"]) for row in rows} == {(size, size)}


def test_a_dedicated_server_computes_what_allreduce_and_one_process_compute(
    tmp_path: Path,
) -> None:
    """3 ranks: rank 0 only serves, ranks 1 and 2 train (the data-parallel degree of DDP on 2)."""
    spec = spec_for(3, reduce="parameter_server", server="dedicated")
    server = trained(spec, tmp_path / "dedicated")
    ring = trained(spec_for(2), tmp_path / "ring")

    assert spec.parallelism.data_parallel_degree == 2
    assert_replicas_identical(server, 3)  # the server's weights and both workers'
    reference = reference_weights(spec)
    assert_close(rank_weights(server, 0, STEPS), reference)
    assert_close(rank_weights(server, 0, STEPS), rank_weights(ring, 0, STEPS))
    # the job's loss is the server's: the mean of its workers' (it trains on no batch)
    rows = {rank: metrics(server, rank) for rank in range(3)}
    for row, one, two in zip(rows[0], rows[1], rows[2], strict=True):
        assert row["loss"] == pytest.approx((one["loss"] + two["loss"]) / 2, rel=1e-6)
        assert row["compute_time"] < one["compute_time"]  # no forward or backward of its own
    # each gradient travels with its worker's loss (4 bytes); the weights come back alone
    size = sum(v.numel() * v.element_size() for v in reference.values())
    assert rows[0][0]["bytes_received"] == 2 * (size + 4)
    assert rows[0][0]["bytes_sent"] == 2 * size
    assert (rows[1][0]["bytes_sent"], rows[1][0]["bytes_received"]) == (size + 4, size)


def test_async_with_one_worker_and_a_dedicated_server_is_the_one_process_reference(
    tmp_path: Path,
) -> None:
    spec = spec_for(2, update="async", server="dedicated")
    out = trained(spec, tmp_path / "async")

    assert_replicas_identical(out, 2)
    assert_close(rank_weights(out, 0, STEPS), reference_weights(spec))
    server, worker = metrics(out, 0), metrics(out, 1)
    assert [row["updates_applied"] for row in server] == [1] * STEPS  # one update a step
    assert [row["staleness_max"] for row in server] == [0] * STEPS  # never stale
    assert [row["loss"] for row in server] == [row["loss"] for row in worker]


def test_a_dedicated_async_server_applies_each_gradient_as_it_arrives(tmp_path: Path) -> None:
    """Rank 0 serves ranks 1 and 2; rank 2 is slowed 100 ms a step and rank 1 is not held."""
    out = trained(straggler_spec(server="dedicated"), tmp_path / "async")

    server = metrics(out, 0)
    assert [row["step"] for row in server] == list(range(1, STRAGGLER_STEPS + 1))
    # a job step is a global batch's worth: the next 2 gradients, whoever sent them
    assert all(row["updates_applied"] >= 2 for row in server)
    fast, slow = own_steps(out, 1, dedicated=True), own_steps(out, 2, dedicated=True)
    assert fast >= 2 * slow, f"rank 1 took {fast} steps, the slowed rank 2 {slow}"
    assert sum(row["updates_applied"] for row in server) == fast + slow  # every gradient once
    assert max(row["staleness_max"] for row in server) >= 1  # rank 1 updated in between
    assert_replicas_identical(out, 3, steps=(STRAGGLER_STEPS,))


def test_a_dedicated_server_resumes_exactly_on_the_same_ranks_and_on_fewer(
    tmp_path: Path,
) -> None:
    spec = spec_for(3, reduce="parameter_server", server="dedicated")
    whole = trained(spec, tmp_path / "whole")
    saved = whole / "checkpoints" / f"step-{EVERY}"
    resume(spec, tmp_path / "same", saved)
    # 1 server + 1 worker: the global batch of 2 workers kept by twice the accumulation
    resume(spec_for(2, reduce="parameter_server", server="dedicated"), tmp_path / "fewer", saved)

    for rank in range(3):
        resumed, expected = (
            rank_weights(tmp_path / "same", rank, STEPS),
            rank_weights(whole, 0, STEPS),
        )
        for key, value in expected.items():
            assert torch.equal(resumed[key], value), f"rank {rank} {key}"
    assert_replicas_identical(tmp_path / "fewer", 2, steps=(STEPS,))
    assert_close(rank_weights(tmp_path / "fewer", 0, STEPS), rank_weights(whole, 0, STEPS))


def test_an_async_dedicated_server_saved_on_three_resumes_on_two(tmp_path: Path) -> None:
    three = trained(spec_for(3, update="async", server="dedicated"), tmp_path / "three")
    two = spec_for(2, update="async", server="dedicated")
    resume(two, tmp_path / "two", three / "checkpoints" / f"step-{EVERY}")

    assert_replicas_identical(tmp_path / "two", 2, steps=(STEPS,))
    final = rank_weights(tmp_path / "two", 0, STEPS)
    assert all(torch.isfinite(v).all() for v in final.values())
    resumed_at = rank_weights(three, 0, EVERY)
    assert any(not torch.equal(resumed_at[k], v) for k, v in final.items())  # it trained on


def test_local_sgd_averaging_every_step_is_synchronous_sgd(tmp_path: Path) -> None:
    local = trained(sgd_spec(2, update="local_sgd", sync_every=1), tmp_path / "local")
    ring = trained(sgd_spec(2), tmp_path / "ring")

    assert_replicas_identical(local, 2)
    assert_close(rank_weights(local, 0, STEPS), rank_weights(ring, 0, STEPS))
    assert_close(rank_weights(local, 0, STEPS), reference_weights(sgd_spec(2)))


def test_local_sgd_replicas_drift_between_averages_and_meet_at_checkpoints(
    tmp_path: Path,
) -> None:
    local = trained(spec_for(2, update="local_sgd", sync_every=4), tmp_path / "local")

    assert_replicas_identical(local, 2)  # a checkpoint averages (steps 3 and 6: not multiples)
    sent = {row["step"]: row["bytes_sent"] for row in metrics(local, 1)}
    assert [step for step, n in sorted(sent.items()) if n] == [4]  # one average in 6 steps
    ring = rank_weights(trained(spec_for(2), tmp_path / "ring"), 0, STEPS)
    assert any(  # it is not synchronous SGD
        not torch.allclose(rank_weights(local, 0, STEPS)[k], ring[k]) for k in ring
    )


def test_async_with_one_worker_is_the_one_process_reference(tmp_path: Path) -> None:
    spec = spec_for(1, update="async")
    out = trained(spec, tmp_path / "async")

    assert_close(rank_weights(out, 0, STEPS), reference_weights(spec))


def test_async_applies_every_gradient_and_records_staleness(tmp_path: Path) -> None:
    out = trained(spec_for(3, update="async"), tmp_path / "async")

    assert_replicas_identical(out, 3)  # the gang meets at every report
    server = metrics(out, 0)
    assert [row["step"] for row in server] == list(range(1, STEPS + 1))  # the job's steps
    worker_steps = sum(own_steps(out, rank) for rank in (1, 2))
    assert sum(row["updates_applied"] for row in server) == worker_steps  # each gradient once
    assert all(row["staleness_max"] >= 0 for row in server)
    assert max(row["staleness_max"] for row in server) >= 1  # rank 0 stepped in between
    loss = [row["loss"] for row in server]
    assert all(torch.isfinite(torch.tensor(loss)))
    start = rank_weights(out, 0, EVERY)
    assert any(not torch.equal(start[k], v) for k, v in rank_weights(out, 0, STEPS).items())


@pytest.mark.parametrize(
    "parallelism",
    [{"reduce": "parameter_server"}, {"update": "local_sgd", "sync_every": 2}],
    ids=["sync-parameter-server", "local-sgd"],
)
def test_resuming_in_the_middle_gives_the_uninterrupted_run(
    parallelism: dict[str, object], tmp_path: Path
) -> None:
    spec = spec_for(2, **parallelism)
    whole = trained(spec, tmp_path / "whole")
    resume(spec, tmp_path / "resumed", whole / "checkpoints" / f"step-{EVERY}")

    for rank in range(2):
        resumed, expected = (
            rank_weights(tmp_path / "resumed", rank, STEPS),
            rank_weights(whole, rank, STEPS),
        )
        for key, value in expected.items():
            assert torch.equal(resumed[key], value), f"rank {rank} {key}"


def test_parameter_server_saved_on_four_resumes_on_two_as_if_uninterrupted(
    tmp_path: Path,
) -> None:
    def on(devices: int) -> JobSpec:  # global batch 32: 8 x 4 replicas, or 8 x 2 x accumulation 2
        return JobSpec.model_validate(
            {
                "name": "elastic-ps",
                "template": "mlp",
                "parallelism": {"devices": devices, "reduce": "parameter_server"},
                "hyperparameters": small_mlp(STEPS),
                "checkpoint": {"every_steps": EVERY, "keep_last": 10},
            }
        )

    straight = trained(on(4), tmp_path / "straight")
    resume(on(2), tmp_path / "two", straight / "checkpoints" / f"step-{EVERY}")

    assert_replicas_identical(tmp_path / "two", 2, steps=(STEPS,))
    assert_close(rank_weights(tmp_path / "two", 0, STEPS), rank_weights(straight, 0, STEPS))


@pytest.mark.parametrize(
    "parallelism",
    [{"update": "async"}, {"update": "local_sgd", "sync_every": 2}],
    ids=["async", "local-sgd"],
)
def test_saved_on_two_resumes_on_four_with_replicas_identical(
    parallelism: dict[str, object], tmp_path: Path
) -> None:
    two = trained(spec_for(2, **parallelism), tmp_path / "two")
    resume(spec_for(4, **parallelism), tmp_path / "four", two / "checkpoints" / f"step-{EVERY}")

    assert_replicas_identical(tmp_path / "four", 4, steps=(STEPS,))
    final = rank_weights(tmp_path / "four", 0, STEPS)
    assert all(torch.isfinite(v).all() for v in final.values())
    resumed_at = rank_weights(two, 0, EVERY)
    assert any(not torch.equal(resumed_at[k], v) for k, v in final.items())  # it trained on


def async_two_ranks_meeting_every_step(spec: JobSpec) -> dict[str, torch.Tensor]:
    """What async on 2 ranks computes when the gang meets after every step: rank 0 applies its
    own gradient, then rank 1's, computed on the same weights (staleness 1), each clipped alone."""
    hp = spec.hyperparameters
    task = build_task("mlp", hp)
    model, params = task.model, list(task.model.parameters())
    optimizer = build_optimizer(
        params, name=hp["optimizer"], lr=hp["lr"], weight_decay=hp["weight_decay"]
    )
    shards = [
        ShardedBatches(
            task.inputs, task.targets, batch_size=hp["batch_size"], rank=r, replicas=2,
            seed=hp["seed"],
        )
        for r in range(2)
    ]  # fmt: skip
    for step in range(hp["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(
                step + 1, peak=hp["lr"], total_steps=hp["steps"], schedule=spec.lr_schedule
            )
        grads = []
        for shard in shards:  # both on the weights every rank holds after the last meeting
            inputs, targets = shard.batch(step)
            task.loss_fn(model(inputs), targets).backward()
            grads.append([p.grad for p in params])
            optimizer.zero_grad()
        for grad in grads:  # rank 0's own first, then the worker's
            for p, g in zip(params, grad, strict=True):
                p.grad = g
            torch.nn.utils.clip_grad_norm_(params, spec.grad_clip or float("inf"))
            optimizer.step()
            optimizer.zero_grad()
    return model.state_dict()


def test_async_meeting_every_step_applies_the_stale_gradient_exactly(tmp_path: Path) -> None:
    spec = JobSpec.model_validate(
        {
            "name": "async-exact",
            "template": "mlp",
            "parallelism": {"devices": 2, "update": "async"},
            "hyperparameters": small_mlp(STEPS),
            "grad_clip": 0.5,
            "lr_schedule": {"kind": "cosine", "warmup_steps": 2},
            "checkpoint": {"every_steps": 1, "keep_last": 1},  # a report, so a meeting, a step
        }
    )
    out = trained(spec, tmp_path / "async")

    assert_replicas_identical(out, 2, steps=tuple(range(1, STEPS + 1)))
    assert_close(rank_weights(out, 0, STEPS), async_two_ranks_meeting_every_step(spec))
    server = metrics(out, 0)
    assert [row["updates_applied"] for row in server] == [1] * STEPS
    assert [row["staleness_max"] for row in server] == [1] * STEPS


STRAGGLER_STEPS, SLOW_MS = 40, 100


def straggler_spec(*, devices: int = 3, slow: int = 2, **parallelism: object) -> JobSpec:
    """Rank `slow` takes SLOW_MS longer a step (spec.straggler); checkpoints only at the end:
    reports come at rank 0's pace (about 0.25 s)."""
    return JobSpec.model_validate(
        {
            "name": "straggler",
            "template": "mlp",
            "parallelism": {"devices": devices, "update": "async", **parallelism},
            "hyperparameters": small_mlp(STRAGGLER_STEPS),
            "checkpoint": {"every_steps": STRAGGLER_STEPS},
            "straggler": {"rank": slow, "delay_ms": SLOW_MS},
        }
    )


def dataset_loss(spec: JobSpec, weights: dict[str, torch.Tensor] | None) -> float:
    """The template's loss over its whole dataset, at `weights` (None: the initial ones)."""
    assert spec.template is not None
    task = build_task(spec.template, spec.hyperparameters)
    if weights is not None:
        task.model.load_state_dict(weights)
    with torch.no_grad():
        return float(task.loss_fn(task.model(task.inputs), task.targets))


def test_a_slowed_rank_does_not_hold_the_fast_ranks_back(tmp_path: Path) -> None:
    """Rank 2 takes 100 ms longer a step; without a staleness bound ranks 0 and 1 step on."""
    spec = straggler_spec()
    out = trained(spec, tmp_path / "async")

    fast, slow = own_steps(out, 1), own_steps(out, 2)
    assert own_steps(out, 0) == STRAGGLER_STEPS  # the job's steps are rank 0's
    assert fast >= 2 * slow, f"rank 1 took {fast} steps, the slowed rank 2 {slow}"
    server = metrics(out, 0)
    assert sum(row["updates_applied"] for row in server) == fast + slow  # every gradient once
    assert_replicas_identical(out, 3, steps=(STRAGGLER_STEPS,))
    # the documented tolerance (docs/engine.md): the loss over the whole dataset falls at
    # least half as far as the 1-process reference's (same steps, global batch of 3 ranks)
    start = dataset_loss(spec, None)
    reference = dataset_loss(spec, reference_weights(spec))
    reached = dataset_loss(spec, rank_weights(out, 0, STRAGGLER_STEPS))
    assert start - reached >= 0.5 * (start - reference), (start, reached, reference)


def test_max_staleness_bounds_every_update_and_makes_the_fast_ranks_wait(
    tmp_path: Path,
) -> None:
    """With max_staleness 2 (one round of 3 ranks) rank 0 waits for the slowed rank 2."""
    out = trained(straggler_spec(max_staleness=2), tmp_path / "bounded")

    server = metrics(out, 0)
    assert max(row["staleness_max"] for row in server) <= 2
    fast, slow = own_steps(out, 1), own_steps(out, 2)
    # each of rank 2's gradients waits through at most 2 updates, one of them rank 0's own
    # (a meeting hands it fresh weights besides): rank 1 keeps about rank 2's pace
    assert fast <= 2 * slow + 2, f"rank 1 took {fast} steps, the slowed rank 2 {slow}"
    assert sum(row["updates_applied"] for row in server) == fast + slow


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


@pytest.mark.parametrize(
    "parallelism",
    [{"update": "sync"}, {"update": "sync", "reduce": "parameter_server"}],
    ids=["allreduce", "parameter-server"],
)
def test_a_straggler_sets_the_pace_of_sync_but_not_the_fast_rank_of_async(
    parallelism: dict[str, object], tmp_path: Path
) -> None:
    """2 ranks, rank 1 slowed 100 ms a step: under sync rank 0's steps (as the engine timed
    them) take about as long as rank 1's; under async rank 0 steps on at its own pace."""
    sync = trained(straggler_spec(devices=2, slow=1, **parallelism), tmp_path / "sync")
    unsync = trained(straggler_spec(devices=2, slow=1), tmp_path / "async")

    def step_times(out: Path, rank: int) -> float:
        return median([row["step_time"] for row in metrics(out, rank)])

    # sync: rank 0 waits for rank 1's gradient every step (its own work is a few ms)
    assert step_times(sync, 0) >= 0.5 * step_times(sync, 1) >= 0.5 * SLOW_MS / 1000
    # async: rank 0 takes the job's steps, rank 1 contributes what its pace allows
    assert step_times(unsync, 0) <= 0.25 * step_times(unsync, 1)
    assert own_steps(unsync, 0) == STRAGGLER_STEPS >= 2 * own_steps(unsync, 1)
