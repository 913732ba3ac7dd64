"""an attempt run by the Slurm executor keeps its Slurm job id

Create Date: 2026-11-28 14:55:00

`attempts.slurm_job_id` is the id `sbatch --parsable` gave the attempt's Slurm job
(backend.executors.slurm); null for the node pool's attempts and every attempt before.
"""

import sqlalchemy as sa

from migrations.helpers import adding, column

#: what this revision adds, per table (dropped again in reverse order)
ADDED = {
    "attempts": (
        column(
            "slurm_job_id",
            sa.String(32),
            "the Slurm job that runs it (the Slurm executor only)",
        ),
    )
}

revision: str = "0024"
down_revision: str | None = "0023"

upgrade, downgrade = adding(ADDED)
