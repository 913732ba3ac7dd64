"""User programs for the run-health tests."""

from __future__ import annotations

import textwrap

#: two ranks report step_time; rank 1 sleeps 50 ms more per step (a straggler), then after
#: BLOCK_AT steps it sleeps forever while rank 0 waits for it in a collective (a hang)
HANGING_SCRIPT = textwrap.dedent(
    """
    import time
    import torch.distributed as dist
    from workers import sdk

    BLOCK_AT = {block_at}
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(1, 10_000):
        began = time.perf_counter()
        time.sleep(0.01 + (0.05 if rank == 1 else 0.0))
        sdk.report(step, step_time=time.perf_counter() - began)
        if step == BLOCK_AT:
            sdk.phase("collective")
            if rank == 1:
                time.sleep(3600)  # stuck: never reaches the barrier
            dist.barrier()
    """
)


def hanging_script(block_at: int = 30) -> str:
    """The script, blocking after `block_at` steps."""
    return HANGING_SCRIPT.format(block_at=block_at)
