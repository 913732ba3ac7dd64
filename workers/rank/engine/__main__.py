"""Entry point of a rank: config → build → train → destroy."""

from __future__ import annotations

import os
import sys

import torch

from workers.contract.rank_env import (
    EXIT_EXPLAINED,
    EXIT_FINAL,
    EXIT_PAUSE,
    EXIT_PLATFORM,
    RankEnv,
    failure_file,
)
from workers.rank import sdk
from workers.rank.engine import distributed
from workers.rank.engine.config import load_config
from workers.rank.engine.errors import EngineFailure, PauseForDiskFull
from workers.rank.engine.facts import report_start
from workers.rank.engine.memory_guard import inject_host_oom, out_of_memory
from workers.rank.engine.templates import build_task
from workers.rank.engine.train import Trainer

#: the trainer outlives main(): see _exit
_kept: list[object] = []


def main() -> int:
    """Run this rank's share of the attempt; exit 0 on success and on a requested stop."""
    config = load_config()
    sdk.should_stop()  # installs the SIGTERM handler before the first step
    parallelism = config.spec.parallelism
    # the supervisor reports each start-up phase as the job's event (workers/supervisor/startup)
    sdk.phase("rendezvous")
    ctx = distributed.setup(
        config.env,
        pp_size=parallelism.stages,
        servers=parallelism.servers,
        rendezvous_timeout_s=parallelism.rendezvous_timeout_s,
    )
    sdk.phase("build")  # model, optimizer, data (and a checkpoint to resume from)
    try:
        trainer = Trainer(
            config.spec,
            build_task(config.template, config.spec.hyperparameters),
            ctx,
            checkpoint_dir=config.env.checkpoint_dir,
            tag=f"attempt-{config.env.attempt_id}",
            # under a supervisor, retention is its job: it prunes only while it holds the
            # node's lease, so an attempt fenced off never deletes what its successor uses
            prune=config.env.telemetry_fd is None,
        )
        if config.env.resume_from is not None:
            trainer.resume(config.env.resume_from)
            if ctx.is_leader:
                print(
                    f"resumed from {config.env.resume_from} at step {trainer.step} "
                    f"(global batch {trainer.global_batch} = {trainer.batch_size} x "
                    f"{trainer.accum} accumulation x {ctx.dp_size} replicas)",
                    flush=True,
                )
        if ctx.is_leader:  # what it uses, for the job page (not the spec's arithmetic)
            report_start(trainer, ctx)
        _kept.append(trainer)
        if config.oom_hook is not None:
            inject_host_oom(trainer, *config.oom_hook)
        sdk.phase("train")
        try:
            result = trainer.run()
        except (torch.cuda.OutOfMemoryError, MemoryError) as err:
            raise out_of_memory(err, trainer, rank=ctx.rank) from err
        how = "stopped" if result.stopped else "finished"
        if not ctx.is_leader:  # every rank says how it ended, in its own log
            print(f"rank {ctx.rank} {how} at step {result.step}/{trainer.total_steps}", flush=True)
        else:
            print(
                f"{how} at step {result.step}/{trainer.total_steps} "
                f"(training loop {trainer.loop_seconds:.3f} s, of which checkpoints "
                f"{trainer.checkpoint_seconds:.3f} s; cpu {trainer.loop_cpu_seconds:.3f} s, "
                f"of which checkpoints {trainer.checkpoint_cpu_seconds:.3f} s)",
                flush=True,
            )
    finally:
        distributed.teardown()
        sdk.flush()
    return 0


def explain(env: RankEnv | None, failure: EngineFailure) -> int:
    """Leave the reason where the supervisor reads it; the exit status says it is there."""
    print(f"trainboard: {failure.reason}", file=sys.stderr, flush=True)
    if env is not None:
        failure_file(env.run_dir, env.rank).write_text(failure.reason)
    if isinstance(failure, PauseForDiskFull):
        return EXIT_PAUSE
    if getattr(failure, "final", False):
        return EXIT_FINAL
    return EXIT_PLATFORM if getattr(failure, "platform_fault", False) else EXIT_EXPLAINED


def _exit(code: int) -> None:
    """Leave without running destructors.

    Freeing the DDP module frees its reducer, which holds the last reference to the (already
    destroyed) gloo process group; its destructor joins gloo's worker thread while holding
    the GIL, and that thread can be waiting for the GIL to drop a tensor of its last work:
    the rank hung forever after "finished" (seen in a supervisor test here, and on torchrun
    ranks that test runs left behind). Everything that matters is flushed by then
    (checkpoints are written synchronously, `sdk.flush()` ran), so skip the teardown.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        code = main()
    except EngineFailure as failure:
        code = explain(RankEnv.from_env(), failure)
    _exit(code)
