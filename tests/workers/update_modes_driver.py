"""Under torchrun: parallel_driver.py, also writing each rank's published metric rows as JSON."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parallel_driver import DumpingTrainer, main

from workers.rank.engine.metrics import MetricBuffer, Row
from workers.rank.engine.pipeline import Batch
from workers.rank.engine.train import TrainResult

#: "RANK:SECONDS": that rank's forward and backward take SECONDS longer (a slow device)
SLOW_RANK = "TB_TEST_SLOW_RANK"


class RecordingTrainer(DumpingTrainer):
    """Dumps weights at checkpoints and appends every published row to rank<N>-metrics.jsonl."""

    def run(self) -> TrainResult:
        path = self.out_dir / f"rank{self.ctx.rank}-metrics.jsonl"
        self.metrics = MetricBuffer(_Recorder(path))
        slow = os.environ.get(SLOW_RANK)
        if slow and int(slow.split(":")[0]) == self.ctx.rank:
            self.runner.forward_backward = _slowed(  # type: ignore[method-assign]
                self.runner.forward_backward, float(slow.split(":")[1])
            )
        return super().run()


def _slowed(compute: Callable[[list[Batch]], Any], seconds: float) -> Callable[..., Any]:
    def slow_compute(batches: list[Batch]) -> Any:
        time.sleep(seconds)  # inside the step: its step_time shows it, as a slow device's would
        return compute(batches)

    return slow_compute


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, rows: list[Row]) -> None:
        with self.path.open("a") as out:
            for step, values in rows:
                out.write(json.dumps({"step": step, **values}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], RecordingTrainer)
