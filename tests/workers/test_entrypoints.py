"""User programs: confined to the script roots, run with torchrun's environment, printed losses
become metric points."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
from worker_helpers import attempt_order, read_items, with_script

from workers.contract.entrypoints import EntrypointRefused, resolve
from workers.contract.protocol import LOGS_STREAM, METRICS_STREAM
from workers.contract.spec import Entrypoint, JobSpec
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings
from workers.supervisor.stdout_metrics import StdoutMetrics

#: an unmodified torchrun-style program: only torch.distributed and print
TORCHRUN_SCRIPT = textwrap.dedent(
    """
    import os
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # env://, exactly as under torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    assert int(os.environ["LOCAL_RANK"]) == rank and world == int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4)
    y = x.sum(dim=1, keepdim=True)
    for step in range(1, 21):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        if rank == 0:
            print(f"step {step}: train loss {loss.item():.5f}", flush=True)
    dist.destroy_process_group()
    """
)


def entry(**fields: object) -> Entrypoint:
    """An Entrypoint built without the API's validation, to test the worker's own checks."""
    return Entrypoint.model_construct(**{"args": [], "script": None, "module": None, **fields})


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    """An allowed root with a script and a package, and a directory outside it."""
    root, outside = tmp_path / "scripts", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "train.py").write_text("print('hi')\n")
    (outside / "evil.py").write_text("print('escaped')\n")
    (root / "escape.py").symlink_to(outside / "evil.py")
    (root / "linked").symlink_to(outside)
    (root / "alias.py").symlink_to(root / "train.py")
    return root, outside


def test_scripts_and_modules_resolve_inside_the_roots(roots: tuple[Path, Path]) -> None:
    root, _ = roots
    launch = resolve(entry(script="train.py", args=["--lr", "0.1"]), [root])
    assert launch.argv[1:] == [str(root / "train.py"), "--lr", "0.1"] and launch.root == root
    assert resolve(entry(script="alias.py"), [root]).argv[1] == str(root / "train.py")
    assert resolve(entry(module="pkg.train"), [root]).argv[1:] == ["-m", "pkg.train"]


@pytest.mark.parametrize(
    "target",
    [
        {"script": "../outside/evil.py"},
        {"script": "pkg/../../outside/evil.py"},
        {"script": "/etc/passwd"},
        {"script": "escape.py"},
        {"script": "linked/evil.py"},
        {"script": "missing.py"},
        {"script": "pkg"},
        {"module": "linked.evil"},
    ],
)
def test_escapes_and_missing_files_are_refused(
    roots: tuple[Path, Path], target: dict[str, str]
) -> None:
    root, outside = roots
    if target.get("script") == "/etc/passwd":
        target = {"script": str(outside / "evil.py")}  # absolute, outside every root
    with pytest.raises(EntrypointRefused, match="not found under the allowed roots"):
        resolve(entry(**target), [root])


def test_common_print_shapes_become_metrics() -> None:
    parse = StdoutMetrics().parse
    assert parse("loss 2.31") == [(1, "loss", 2.31)]
    assert parse("loss=2.5") == [(2, "loss", 2.5)]
    assert parse("step 100: train loss 2.31, val loss 2.40") == [
        (100, "train_loss", 2.31),
        (100, "val_loss", 2.40),
    ]
    assert parse("iter 7 | lr 3e-4 | Loss: 0.5") == [(7, "loss", 0.5), (7, "lr", 3e-4)]
    assert parse("epoch 3 done in 12 s") == []
    custom = StdoutMetrics([r"(?P<name>reward)\s+(?P<value>\S+)"], r"ep=(?P<step>\d+)")
    assert custom.parse("ep=4 reward 1.5 loss 3") == [(4, "reward", 1.5)]


@pytest.mark.slow
def test_unmodified_torchrun_script_runs_on_two_ranks_and_its_losses_become_points(
    tmp_path: Path, supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    settings = with_script(supervisor_settings, tmp_path / "scripts", "train.py", TORCHRUN_SCRIPT)
    spec = JobSpec.model_validate(
        {"name": "user-script", "entrypoint": {"script": "train.py"}, "parallelism": {"devices": 2}}
    )

    outcome = Supervisor(attempt_order(spec), settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    lines = [i["line"] for i in read_items(redis_url, LOGS_STREAM) if i["rank"] == 0]
    printed = {int(line.split()[1][:-1]): float(line.split()[-1]) for line in lines}
    points = read_items(redis_url, METRICS_STREAM)
    assert {(p["rank"], p["name"]) for p in points} == {(0, "train_loss")}
    assert {p["step"]: p["value"] for p in points} == printed
    assert sorted(printed) == list(range(1, 21)) and printed[20] < 0.5 * printed[1]


def test_an_entrypoint_outside_the_roots_fails_the_attempt_without_starting_it(
    tmp_path: Path, supervisor_settings: SupervisorSettings
) -> None:
    (tmp_path / "evil.py").write_text("print('escaped')\n")
    spec = JobSpec.model_validate({"name": "evil", "entrypoint": {"script": "evil.py"}})
    settings = dataclasses.replace(
        supervisor_settings, script_roots=[(tmp_path / "scripts").resolve()]
    )

    supervisor = Supervisor(attempt_order(spec), settings)
    outcome = supervisor.run()

    assert outcome.outcome == "failed" and not supervisor.processes
    assert outcome.reason is not None and "allowed roots" in outcome.reason
