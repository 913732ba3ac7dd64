"""Under torchrun: parallel_driver.py, also writing each rank's published metric rows as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from parallel_driver import DumpingTrainer, main

from workers.rank.engine.metrics import MetricBuffer, Row
from workers.rank.engine.train import TrainResult


class RecordingTrainer(DumpingTrainer):
    """Dumps weights at checkpoints and appends every published row to rank<N>-metrics.jsonl."""

    def run(self) -> TrainResult:
        path = self.out_dir / f"rank{self.ctx.rank}-metrics.jsonl"
        self.metrics = MetricBuffer(_Recorder(path))
        return super().run()


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, rows: list[Row]) -> None:
        with self.path.open("a") as out:
            for step, values in rows:
                out.write(json.dumps({"step": step, **values}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], RecordingTrainer)
