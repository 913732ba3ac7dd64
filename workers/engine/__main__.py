"""Entry point of a rank: config → build → train → destroy."""

from __future__ import annotations

import sys

from workers import sdk
from workers.engine import distributed
from workers.engine.config import load_config
from workers.engine.templates import build_task
from workers.engine.train import Trainer


def main() -> int:
    """Run this rank's share of the attempt; exit 0 on success and on a requested stop."""
    config = load_config()
    sdk.should_stop()  # installs the SIGTERM handler before the first step
    ctx = distributed.setup(config.env)
    try:
        trainer = Trainer(
            config.spec,
            build_task(config.template, config.spec.hyperparameters),
            ctx,
            checkpoint_dir=config.env.checkpoint_dir,
            tag=f"attempt-{config.env.attempt_id}",
        )
        if config.env.resume_from is not None:
            trainer.resume(config.env.resume_from)
            if ctx.is_leader:
                print(f"resumed from {config.env.resume_from} at step {trainer.step}", flush=True)
        result = trainer.run()
        if ctx.is_leader:
            how = "stopped" if result.stopped else "finished"
            print(f"{how} at step {result.step}/{trainer.total_steps}", flush=True)
    finally:
        distributed.teardown()
        sdk.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
