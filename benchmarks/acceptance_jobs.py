"""The acceptance run's jobs, submitted and controlled through the real REST API.

`plan()` says which jobs a machine with N devices runs; `Api` submits them, waits for
states, and reads back what a user would: the job, its attempts, its loss series, its logs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks.acceptance_verdict import Verdict

TERMINAL = {"succeeded", "failed", "cancelled"}


@dataclass
class Planned:
    """One job of the run and what it must end as."""

    spec: dict[str, Any]
    expect: str = "succeeded"
    #: for an expected failure: words its reason must contain
    reason_has: str = ""
    job_id: int = 0

    @property
    def name(self) -> str:
        return str(self.spec["name"])


def _spec(name: str, template: str, steps: int, **extra: Any) -> dict[str, Any]:
    hp = {"steps": steps, "batch_size": 32, **extra.pop("hp", {})}
    # no restarts: a failure shows at once (an fp16 job on CPU slots was retried twice, ~40 s)
    spec = {"name": name, "template": template, "hyperparameters": hp, "max_restarts": 0}
    return spec | extra


def plan(*, devices: int, gpu: bool, steps: int) -> tuple[list[Planned], list[tuple[str, str]]]:
    """The training jobs for `devices` devices; and (job, why) for those this machine skips."""
    small = {"n_layer": 2, "n_embd": 64, "n_head": 2, "block_size": 32}
    jobs = [
        Planned(_spec("mlp-data-1", "mlp", steps)),
        Planned(_spec("cnn-data-1", "cnn", steps, hp={"channels": 8, "blocks": 2})),
        Planned(_spec("gpt-data-1", "gpt", steps, hp=small)),
        Planned(_spec("mlp-bf16", "mlp", steps, precision="bf16")),
    ]
    fp16 = _spec("mlp-fp16-gradscaler", "mlp", steps, precision="fp16")
    if gpu:
        jobs.append(Planned(fp16))
    else:  # the engine refuses it on CPU slots, with a reason the user can act on
        jobs.append(Planned(fp16, expect="failed", reason_has="fp16 needs a CUDA GPU"))
    skipped = []
    pipe = {"microbatches": 4, "schedule": "1f1b"}
    two = [
        _spec("mlp-data-2", "mlp", steps, parallelism={"strategy": "data", "devices": 2}),
        _spec("mlp-model-2", "mlp", steps, parallelism={"strategy": "model", "devices": 2, **pipe}),
    ]
    hybrid = _spec(
        "mlp-hybrid-4",
        "mlp",
        steps,
        parallelism={"strategy": "hybrid", "devices": 4, "pipeline_stages": 2, **pipe},
    )
    for spec in [*two, hybrid] if gpu else ():  # NCCL prints its version line at init
        spec["env"] = {"NCCL_DEBUG": "VERSION"}
    for spec in two:
        if devices >= 2:
            jobs.append(Planned(spec))
        else:
            skipped.append((spec["name"], f"needs 2 devices, this machine has {devices}"))
    if devices >= 4:  # hybrid is pipeline stages x data replicas: 2 x 2 at the least
        jobs.append(Planned(hybrid))
    else:
        skipped.append((hybrid["name"], f"needs 4 devices (2 stages x 2 replicas), has {devices}"))
    return jobs, skipped


class Api:
    """The REST calls the run makes, as the admin."""

    def __init__(self, url: str, token: str, *, deadline: float = float("inf")) -> None:
        self.client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        #: time.monotonic() by which every wait gives up, so the verdict is written in time
        self.deadline = deadline

    def submit(self, spec: dict[str, Any]) -> int:
        created = self.client.post("/api/jobs", json=spec)
        if created.status_code != 201:
            raise RuntimeError(f"submit {spec['name']}: {created.status_code} {created.text}")
        return int(created.json()["id"])

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.client.get(f"/api/jobs/{job_id}").raise_for_status().json())

    def act(self, job_id: int, action: str) -> dict[str, Any]:
        answer = self.client.post(f"/api/jobs/{job_id}/{action}")
        if answer.status_code != 200:
            raise RuntimeError(f"{action} job {job_id}: {answer.status_code} {answer.text}")
        return dict(answer.json())

    def attempts(self, job_id: int) -> list[dict[str, Any]]:
        return list(self.client.get(f"/api/jobs/{job_id}/attempts").raise_for_status().json())

    def loss(self, job_id: int) -> dict[str, list[Any]]:
        return dict(self.client.get(f"/api/jobs/{job_id}/metrics/loss").raise_for_status().json())

    def logs(self, job_id: int) -> list[dict[str, Any]]:
        answer = self.client.get(f"/api/jobs/{job_id}/logs", params={"limit": 10_000})
        return list(answer.raise_for_status().json()["lines"])

    def wait(
        self,
        job_id: int,
        done: Callable[[dict[str, Any]], bool],
        *,
        timeout: float,
        what: str,
        tick: Callable[[], None] = lambda: None,
    ) -> dict[str, Any]:
        """Poll the job until done(job); TimeoutError naming what never happened."""
        timeout = max(0.0, min(timeout, self.deadline - time.monotonic()))
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if done(job):
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"job {job_id} never {what} in {timeout:.0f} s (state {job['state']}, "
                    f"step {job['step']}, reason {job['reason']})"
                )
            tick()
            time.sleep(0.3)


def loss_falls(api: Api, job_id: int, total_steps: int) -> tuple[bool, str, tuple[float, float]]:
    """Whether the mean loss of the last quarter of steps is below 0.95 x the first quarter's."""
    deadline = min(time.monotonic() + 30, api.deadline)  # the last reports may be on their way
    series = api.loss(job_id)
    while len(series["step"]) < total_steps and time.monotonic() < deadline:
        time.sleep(0.5)
        series = api.loss(job_id)
    values = series["value"]
    if len(values) < 8:
        return False, f"only {len(values)} loss points stored of {total_steps}", (0.0, 0.0)
    quarter = len(values) // 4
    first, last = statistics.fmean(values[:quarter]), statistics.fmean(values[-quarter:])
    ok = last < 0.95 * first
    detail = (
        f"{len(values)}/{total_steps} steps stored; mean loss first quarter {first:.4f}, "
        f"last quarter {last:.4f} ({last / first:.2f}x)"
    )
    return ok, detail, (first, last)


def record(api: Api, job: dict[str, Any], began: float) -> dict[str, Any]:
    row = {k: job[k] for k in ("id", "name", "state", "reason", "step", "total_steps")}
    row["attempts"] = len(api.attempts(job["id"]))
    row["wall_s"] = round(time.monotonic() - began, 1)
    return row


def pause_resume(verdict: Verdict, api: Api, *, gpu: bool, tick: Any) -> None:
    """Pause a running job, resume it, and see it continue from its checkpoint to the end."""
    hp = (
        {"steps": 10_000, "hidden": 256}
        if gpu
        # a quiet CPU runs 600 of these steps in seconds: the job could end before the pause
        # reached it (a CI dry run read "succeeded" where "paused" was checked)
        else {"steps": 2000, "hidden": 512, "batch_size": 128}
    )
    spec = {"name": "mlp-pause-resume", "template": "mlp", "hyperparameters": hp}
    began = time.monotonic()
    job_id = api.submit(spec)
    name = "pause and resume"
    try:
        at = api.wait(job_id, lambda j: j["step"] >= 20, timeout=300, what="trained 20 steps",
                      tick=tick)  # fmt: skip
        api.act(job_id, "pause")
        paused = api.wait(job_id, lambda j: j["state"] in TERMINAL | {"paused"}, timeout=120,
                          what="paused", tick=tick)  # fmt: skip
        first = api.attempts(job_id)[-1]
        verdict.check(
            f"{name}: pausing a running job saves a checkpoint",
            paused["state"] == "paused" and bool(first["last_checkpoint"]),
            f"{paused['state']} at step {paused['step']} (pause asked at {at['step']}); checkpoint "
            f"{first['last_checkpoint']}",
        )
        api.act(job_id, "resume")
        final = api.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=300, what="finished",
                         tick=tick)  # fmt: skip
    except (TimeoutError, RuntimeError) as err:
        verdict.fail(name, str(err))
        return
    verdict.jobs.append(record(api, final, began))
    attempts = api.attempts(job_id)
    resumed = [line["line"] for line in api.logs(job_id) if "resumed from" in line["line"]]
    verdict.check(
        f"{name}: the resumed attempt continues from the checkpoint and succeeds",
        final["state"] == "succeeded"
        and len(attempts) == 2
        and attempts[-1]["resume_from"] == attempts[0]["last_checkpoint"]
        and bool(resumed),
        f"{final['state']} at step {final['step']}/{hp['steps']}, {len(attempts)} attempts; "
        + (resumed[0] if resumed else "rank 0 logged no 'resumed from'"),
    )


def cancel(verdict: Verdict, api: Api, *, tick: Any) -> None:
    """Cancel a running job: it stops within the grace period and keeps a final checkpoint."""
    spec = {"name": "mlp-cancel", "template": "mlp", "hyperparameters": {"steps": 1_000_000}}
    began = time.monotonic()
    job_id = api.submit(spec)
    try:
        api.wait(job_id, lambda j: j["step"] >= 5, timeout=300, what="trained 5 steps", tick=tick)
        asked = time.monotonic()
        state = api.act(job_id, "cancel")["state"]
        final = api.wait(job_id, lambda j: j["state"] in TERMINAL, timeout=60, what="stopped",
                         tick=tick)  # fmt: skip
    except (TimeoutError, RuntimeError) as err:
        verdict.fail("cancel", str(err))
        return
    verdict.jobs.append(record(api, final, began))
    last = api.attempts(job_id)[-1]
    ended = final["state"]
    passed = state == "cancelling" and ended == "cancelled" and bool(last["last_checkpoint"])
    detail = f"{state} → {ended} in {time.monotonic() - asked:.1f} s at step {final['step']}"
    if not passed:  # what the ranks said last: did they save, or were they killed first?
        tail = [line["line"] for line in api.logs(job_id)[-6:]]
        detail += f"; attempt ended {last['exit_reason']!r}; its log ends: {tail}"
    verdict.check("cancel: a running job goes cancelling → cancelled with a final checkpoint",
                  passed, detail)  # fmt: skip
