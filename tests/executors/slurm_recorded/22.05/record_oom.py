"""Record 22.05's view of jobs killed for memory by task/cgroup (run by hand, as root):
`python -m tests.executors.slurm_recorded.22.05.record_oom` does not import (a dot in the
folder), so: `.venv/bin/python tests/executors/slurm_recorded/22.05/record_oom.py`.

Two jobs on a one-host cluster with accounting and cgroup v1 memory limits (300 MB): one
whose batch script itself outgrows its memory (the job ends OUT_OF_MEMORY) and one whose
`srun` step does (the step is OUT_OF_MEMORY, srun exits 1, the job FAILED 1). Writes
scontrol_jobs_oom.txt and sacct_oom.txt beside this file.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

from backend.executors.slurm.cli import SACCT_FIELDS  # noqa: E402
from tests.slurm_cluster import slurm_cluster  # noqa: E402

GROW = "python3 -c 'x = [bytearray(50_000_000) for _ in range(40)]'"


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="record-oom-"))
    with slurm_cluster(root, memory=1000, cgroups=True, accounting=True) as cluster:
        ids = []
        for name, line in (("batch-oom", GROW), ("step-oom", f"srun {GROW}")):
            script = root / f"{name}.sh"
            script.write_text(f"#!/bin/bash\n{line}\n")
            ids.append(
                subprocess.run(
                    [
                        "sbatch",
                        "--parsable",
                        f"--job-name={name}",
                        "--mem=300M",
                        f"--output={root}/{name}.out",
                        str(script),
                    ],
                    env=cluster.env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
            )
        for _ in range(120):
            out = subprocess.run(
                ["squeue", "--noheader", f"--jobs={','.join(ids)}"],
                env=cluster.env,
                capture_output=True,
                text=True,
            ).stdout
            if not out.strip():
                break
            time.sleep(1)
        time.sleep(6)  # slurmdbd has the ends
        jobs = "".join(
            subprocess.run(
                ["scontrol", "show", "job", "--oneliner", job_id],
                env=cluster.env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for job_id in ids
        )
        (HERE / "scontrol_jobs_oom.txt").write_text(jobs)
        sacct = subprocess.run(
            [
                "sacct",
                "--parsable2",
                "--noheader",
                "--duplicates",
                f"--jobs={','.join(ids)}",
                f"--format={','.join(SACCT_FIELDS)}",
            ],
            env=cluster.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (HERE / "sacct_oom.txt").write_text(sacct)
        print(jobs, sacct, sep="\n")


if __name__ == "__main__":
    main()
