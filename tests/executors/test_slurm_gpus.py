"""GPU mode under the Slurm executor, on a real one-host Slurm whose node declares 4 GPUs as
GRES (tests/slurm_cluster.py `gpus`: each a plain file, as this machine has no GPU).

The executor finds GPUs in the partition's nodes (scontrol's Gres) and, with nothing set by
the operator, asks each attempt's devices as GPUs: `--gres=gpu:N` per node for sbatch and
srun, one CPU per task. Slurm allocates the GRES and the job runs; its ranks train on the
CPU, since no GPU is really there: what runs on real GPUs is not shown here.
"""

from __future__ import annotations

import subprocess
from typing import Any

from tests.executors.conftest import SLURM_TESTS, cluster_of
from tests.executors.slurm_stack import SlurmStack
from tests.slurm_cluster import SlurmCluster
from tests.stack import wait_for

pytestmark = SLURM_TESTS


cluster = cluster_of("slurm-gpus", cpus=2, kill_wait=2, gpus={"": 4})


def test_a_partition_with_gpus_gets_gpu_jobs_slurm_allocates_as_gres(
    stack: SlurmStack, cluster: SlurmCluster
) -> None:
    spec: dict[str, Any] = {
        "name": "on-gpus",
        "template": "mlp",
        "parallelism": {"strategy": "data", "devices": 2},
        "hyperparameters": {"steps": 20, "batch_size": 16},
    }
    with stack.client() as client:
        # the slot node mirrors Slurm's node: 4 GPUs, not its 2 CPUs
        slot = wait_for(
            lambda: next(
                (
                    n
                    for n in client.get("/api/nodes").json()["nodes"]
                    if n["name"] == "slurm-0" and n["devices"]
                ),
                None,
            ),
            timeout=60,
            what="the Slurm slot node",
        )
        assert [d["kind"] for d in slot["devices"]] == ["gpu"] * 4
        manager = client.get("/api/nodes").json()["manager"]
        assert [(n["cpus"], n["gpus"]) for n in manager["nodes"]] == [(2, 4)]
        posted = client.post("/api/jobs", json=spec)
        assert posted.status_code == 201, posted.text
        job = stack.wait_job(client, posted.json()["id"], "succeeded", "failed", timeout=240)
        assert job["state"] == "succeeded", (job["reason"], stack.log_path.read_text()[-3000:])
        [attempt] = stack.attempts(client, job["id"])
    slurm_id = attempt["slurm_job_id"]
    wait_for(
        lambda: (j := cluster.cli.job(slurm_id)) and j.state == "COMPLETED",
        timeout=30,
        what=f"Slurm job {slurm_id} to complete",
    )
    command = [*cluster.hosts[0].command(cluster.root, []), "scontrol", "show", "job"]
    shown = subprocess.run(
        [*command, "--oneliner", slurm_id],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # 2 GPUs of the node's 4 (as GRES), one CPU for the supervisor (22.05 writes gres:gpu:2,
    # 24.11 gres/gpu:2: slurm_recorded/24.11/scontrol_jobs_gpus.txt)
    per_node = ("TresPerNode=gres:gpu:2 ", "TresPerNode=gres/gpu:2 ")
    assert any(form in shown for form in per_node) and " NumCPUs=1 " in shown, shown
