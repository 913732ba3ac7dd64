"""The update-mode fields of the job contract (#35): defaults, and each bad combination refused
with a message naming it; valid specs the engine cannot run are refused as unsupported."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from workers.contract.spec import JobSpec, unsupported_reason


def spec(**parallelism: Any) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "modes", "template": "mlp", "parallelism": {"devices": 2, **parallelism}}
    )


@pytest.mark.parametrize(
    ("parallelism", "mode"),
    [
        ({}, "sync/allreduce"),
        ({"update": "sync", "reduce": "parameter_server"}, "sync/parameter_server"),
        ({"update": "async"}, "async"),
        ({"update": "local_sgd", "sync_every": 8}, "local_sgd"),
    ],
)
def test_each_mode_is_named_and_runs_on_the_engine(parallelism: dict[str, Any], mode: str) -> None:
    chosen = spec(**parallelism)
    assert chosen.parallelism.mode == mode
    assert unsupported_reason(chosen) is None
    assert chosen.model_dump()["parallelism"]["update"] == parallelism.get("update", "sync")


@pytest.mark.parametrize(
    ("parallelism", "message"),
    [
        ({"update": "async", "reduce": "parameter_server"}, "reduce applies to update sync only"),
        ({"update": "local_sgd", "sync_every": 2, "reduce": "allreduce"}, "reduce applies"),
        ({"sync_every": 4}, "sync_every applies to update local_sgd only"),
        ({"update": "async", "sync_every": 4}, "sync_every applies to update local_sgd only"),
        ({"update": "local_sgd"}, "update local_sgd needs sync_every"),
        ({"max_staleness": 4}, "max_staleness applies to update async only"),
        ({"update": "async", "max_staleness": 0}, "greater than or equal to 1"),
        ({"update": "local_sgd", "sync_every": 0}, "greater than or equal to 1"),
        ({"update": "sometimes"}, "Input should be 'sync', 'async' or 'local_sgd'"),
        ({"reduce": "gossip"}, "Input should be 'allreduce' or 'parameter_server'"),
        (
            {"strategy": "model", "update": "async"},
            "update mode async applies to the data strategy only",
        ),
        (
            {
                "strategy": "hybrid",
                "devices": 4,
                "pipeline_stages": 2,
                "reduce": "parameter_server",
            },
            "update mode sync/parameter_server applies to the data strategy only",
        ),
        # the parameter server's place
        ({"server": "dedicated"}, "server applies to reduce parameter_server and update async"),
        ({"update": "local_sgd", "sync_every": 2, "server": "rank0"}, "server applies to"),
        (
            {"devices": 1, "update": "async", "server": "dedicated"},
            "server dedicated needs at least 2 devices",
        ),
        ({"update": "async", "server": "thread"}, "Input should be 'rank0' or 'dedicated'"),
    ],
)
def test_a_bad_combination_is_refused_naming_it(parallelism: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        spec(**parallelism)
    errors = refused.value.errors()
    assert errors[0]["loc"][0] == "parallelism"
    assert message in errors[0]["msg"]


def test_pipelines_still_take_the_explicit_default() -> None:
    chosen = spec(strategy="model", update="sync", reduce="allreduce")
    assert chosen.parallelism.mode == "sync/allreduce"


def test_fp16_and_entrypoints_are_unsupported_with_the_new_modes() -> None:
    fp16 = JobSpec.model_validate(
        {"name": "m", "template": "mlp", "precision": "fp16", "parallelism": {"update": "async"}}
    )
    assert "fp16" in (unsupported_reason(fp16) or "")
    script = JobSpec.model_validate(
        {
            "name": "m",
            "entrypoint": {"script": "t.py"},
            "parallelism": {"reduce": "parameter_server"},
        }
    )
    assert "template jobs only" in (unsupported_reason(script) or "")
    plain = JobSpec.model_validate({"name": "m", "entrypoint": {"script": "t.py"}})
    assert unsupported_reason(plain) is None


@pytest.mark.parametrize(
    "parallelism", [{"reduce": "parameter_server"}, {"update": "async"}], ids=["sync", "async"]
)
def test_a_dedicated_server_trains_on_no_data(parallelism: dict[str, Any]) -> None:
    chosen = spec(devices=4, server="dedicated", **parallelism)
    assert chosen.parallelism.servers == 1
    assert chosen.parallelism.data_parallel_degree == 3  # rank 0 draws no batch
    assert chosen.global_batch == 3 * chosen.hyperparameters["batch_size"]
    assert unsupported_reason(chosen) is None
    on_rank0 = spec(devices=4, server="rank0", **parallelism)
    assert (on_rank0.parallelism.servers, on_rank0.parallelism.data_parallel_degree) == (0, 4)


def test_a_straggler_is_one_rank_of_a_template_job() -> None:
    slowed = JobSpec.model_validate(
        {"name": "s", "template": "mlp", "parallelism": {"devices": 2},
         "straggler": {"rank": 1, "delay_ms": 40}}
    )  # fmt: skip
    assert slowed.straggler is not None and slowed.straggler.delay_ms == 40
    for straggler, message in [
        ({"rank": 2, "delay_ms": 40}, "straggler.rank (2) must be below parallelism.devices (2)"),
        ({"rank": 1, "delay_ms": 0}, "greater than 0"),
        ({"rank": 1, "delay_ms": 60_001}, "less than or equal to 60000"),
        ({"rank": -1, "delay_ms": 40}, "greater than or equal to 0"),
        ({"rank": 1}, "Field required"),
        ({"rank": 1, "delay_ms": 4, "jitter": 1}, "Extra inputs are not permitted"),
    ]:
        with pytest.raises(ValidationError, match=re.escape(message)):
            JobSpec.model_validate(
                {"name": "s", "template": "mlp", "parallelism": {"devices": 2},
                 "straggler": straggler}
            )  # fmt: skip
    with pytest.raises(ValidationError, match="straggler applies to template jobs only"):
        JobSpec.model_validate(
            {"name": "s", "entrypoint": {"script": "t.py"}, "straggler": {"rank": 0, "delay_ms": 1}}
        )
