"""Efficiency per job (device-hours, throughput per device, MFU), compare by device-hours,
and the pre-launch memory estimate, through the real API on a migrated database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.db import Database, utcnow
from backend.jobs.models import Attempt, AttemptSlice, Job
from backend.nodes.models import Device, Node
from tests.telemetry.helpers import ADMIN, add_attempt, insert_points
from workers.contract.flops import flops_per_sample
from workers.contract.spec import JobSpec

H100 = "NVIDIA H100 80GB HBM3"
T0 = 1_800_000_000.0


def _node(db: Database, name: str, devices: list[tuple[str, str, int]]) -> None:
    with db.session() as session:
        node = Node(name=name, hostname=name, address="127.0.0.1")
        node.devices = [
            Device(index=i, kind=kind, name=label, memory_total=memory)
            for i, (kind, label, memory) in enumerate(devices)
        ]
        session.add(node)


def _ran(
    db: Database, job_id: int, attempt_id: int, *, node: str, devices: int, hours: float
) -> None:
    """The attempt ran on `devices` devices of node for `hours`, from T0; its samples_per_s."""
    start = utcnow() - timedelta(hours=hours + 1)
    with db.session() as session:
        attempt = session.get_one(Attempt, attempt_id)
        attempt.node_name, attempt.devices = node, list(range(devices))
        attempt.claimed_at, attempt.finished_at = start, start + timedelta(hours=hours)
        attempt.state = "succeeded"
        session.add(AttemptSlice(attempt_id=attempt_id, node_name=node, node_rank=0,
                                 devices=list(range(devices)), state="succeeded"))  # fmt: skip
        job = session.get_one(Job, job_id)
        job.devices_requested = devices
        job.spec = JobSpec.model_validate(
            {"name": "eff", "template": "mlp", "parallelism": {"devices": devices}}
        ).model_dump(mode="json")
    start_unix = start.timestamp()
    rows = [
        {
            "attempt_id": attempt_id,
            "rank": 0,
            "step": s,
            "name": name,
            "value": v,
            "time": start_unix + s * 36.0 * hours,
        }  # fmt: skip
        for s in range(1, 101)
        for name, v in (("samples_per_s", 1000.0 * devices), ("loss", 1.0 / s))
    ]
    insert_points(db, rows)


def test_device_hours_throughput_per_device_and_mfu_against_the_gpu_peak(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    _node(db, "gpu-node", [("gpu", H100, 80 * 2**30)])
    _node(db, "cpu-node", [("cpu", f"CPU slot {i}", 16 * 2**30) for i in range(4)])
    gpu_job, gpu_attempt = add_attempt(db)
    cpu_job, cpu_attempt = add_attempt(db)
    _ran(db, gpu_job, gpu_attempt, node="gpu-node", devices=1, hours=1.0)
    _ran(db, cpu_job, cpu_attempt, node="cpu-node", devices=4, hours=0.5)

    gpu = client.get(f"/api/jobs/{gpu_job}/efficiency", headers=ADMIN).json()
    assert gpu["device_hours"] == pytest.approx(1.0, rel=1e-3)
    assert gpu["run_seconds"] == pytest.approx(3600, rel=1e-3)
    assert gpu["samples_per_s_per_device"] == pytest.approx(1000.0)
    flops = flops_per_sample("mlp", JobSpec.model_validate(
        {"name": "e", "template": "mlp"}).hyperparameters)  # fmt: skip
    assert gpu["flops_per_sample"] == flops
    assert gpu["mfu"] == pytest.approx(flops * 1000.0 / 66.9e12)  # fp32: the fp32 peak
    assert gpu["mfu_note"] == "fp32 peak" and gpu["device_names"] == [H100]

    cpu = client.get(f"/api/jobs/{cpu_job}/efficiency", headers=ADMIN).json()
    assert cpu["device_hours"] == pytest.approx(2.0, rel=1e-3)  # 4 devices x 0.5 h
    assert cpu["samples_per_s_per_device"] == pytest.approx(1000.0)  # 4000 over 4 devices
    assert cpu["mfu"] is None and cpu["mfu_note"].startswith("none: CPU slots")

    url = f"/api/series/compare?job={gpu_job}&job={cpu_job}&metric=loss&x=device_hours&points=0"
    body = client.get(url, headers=ADMIN).json()
    assert body["efficiency"][str(cpu_job)]["device_hours"] == pytest.approx(2.0, rel=1e-3)
    curves = body["curves"]["loss"]
    last_gpu = max(x for x, v in zip(curves["x"], curves["values"][str(gpu_job)], strict=True) if v)
    last_cpu = max(x for x, v in zip(curves["x"], curves["values"][str(cpu_job)], strict=True) if v)
    # 100 steps each: 1 device for an hour, 4 devices for half an hour
    assert last_gpu == pytest.approx(1.0, rel=1e-3) and last_cpu == pytest.approx(2.0, rel=1e-3)
    csv = client.get(url.replace("compare?", "compare.csv?"), headers=ADMIN).text
    assert csv.startswith("device_hours,")


def test_the_memory_estimate_says_which_devices_hold_a_spec(
    api: tuple[TestClient, Database],
) -> None:
    client, db = api
    _node(db, "small", [("gpu", "NVIDIA L4", 2 * 2**30)])
    _node(db, "big", [("gpu", H100, 80 * 2**30)])
    hp = {"n_layer": 12, "n_embd": 1024, "block_size": 512, "batch_size": 8}
    spec: dict[str, Any] = {"name": "gpt", "template": "gpt", "hyperparameters": hp}
    body = client.post("/api/estimate/memory", json=spec, headers=ADMIN).json()
    assert body["parameter_count"] > 150_000_000
    parts = ("parameters", "gradients", "optimizer_state", "activations", "runtime")
    assert body["total"] == sum(body[p] for p in parts)
    fits = {(d["node"], d["index"]): d["fits"] for d in body["devices"]}
    assert fits == {("small", 0): False, ("big", 0): True}
    assert body["warnings"] == ["some devices are too small for it: see the devices marked no"]

    huge = {**spec, "hyperparameters": {**spec["hyperparameters"], "batch_size": 4096}}
    warned = client.post("/api/estimate/memory", json=huge, headers=ADMIN).json()["warnings"]
    assert warned[0].startswith("it will not fit: about ")

    # a GPU's memory is its own: one rank's need against it
    big = next(d for d in body["devices"] if d["node"] == "big")
    assert (big["memory_shared"], big["ranks"]) == (False, 1) and big["need"] == body["total"]

    script = {"name": "s", "entrypoint": {"script": "train.py"}}
    refused = client.post("/api/estimate/memory", json=script, headers=ADMIN)
    assert refused.status_code == 422 and "template" in refused.text


def test_a_cpu_slots_memory_is_the_hosts_shared_ram_in_fields_not_words(
    api: tuple[TestClient, Database],
) -> None:
    """Issue #33: the browser read the ranks out of the note's text; now they are fields."""
    client, db = api
    _node(db, "cpus", [("cpu", "CPU slot", 64 * 2**30)] * 3)
    _node(db, "gpus", [("gpu", H100, 80 * 2**30)])
    spec = {"name": "mlp", "template": "mlp", "parallelism": {"devices": 2}}
    body = client.post("/api/estimate/memory", json=spec, headers=ADMIN).json()
    slot = next(d for d in body["devices"] if d["node"] == "cpus")
    # two ranks on the node's slots share its RAM; each needs the estimate without a CUDA runtime
    assert (slot["memory_shared"], slot["ranks"]) == (True, 2)
    assert slot["need"] == 2 * (body["total"] - body["runtime"])
    assert slot["memory_total"] == 64 * 2**30 and slot["fits"] is True
    gpu = next(d for d in body["devices"] if d["node"] == "gpus")
    assert (gpu["memory_shared"], gpu["ranks"], gpu["need"]) == (False, 1, body["total"])

    # the cluster view says the same of its devices
    nodes = {n["name"]: n for n in client.get("/api/nodes", headers=ADMIN).json()["nodes"]}
    assert [d["memory_shared"] for d in nodes["cpus"]["devices"]] == [True, True, True]
    assert [d["memory_shared"] for d in nodes["gpus"]["devices"]] == [False]


def test_a_dedicated_servers_slot_needs_no_activations_in_the_shared_ram(
    api: tuple[TestClient, Database],
) -> None:
    """Issue #35: a dedicated server trains no batch, so one node's RAM holds less than
    every rank's full estimate; on several nodes a node of workers only is what must fit."""
    client, db = api
    _node(db, "cpus", [("cpu", "CPU slot", 64 * 2**30)] * 3)
    par = {"devices": 3, "reduce": "parameter_server", "server": "dedicated"}
    spec = {"name": "ps", "template": "mlp", "parallelism": par}
    body = client.post("/api/estimate/memory", json=spec, headers=ADMIN).json()
    per_rank = body["total"] - body["runtime"]
    server = body["server"] - body["runtime"]
    assert server == per_rank - body["activations"]
    slot = body["devices"][0]
    assert slot["ranks"] == 3 and slot["need"] == 2 * per_rank + server
    assert "(one a dedicated server)" in slot["note"]

    everyone = {**spec, "parallelism": {**par, "server": "rank0"}}
    trains = client.post("/api/estimate/memory", json=everyone, headers=ADMIN).json()
    assert trains["server"] is None
    assert trains["devices"][0]["need"] == 3 * (trains["total"] - trains["runtime"])
