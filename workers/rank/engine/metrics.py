"""Per-step metrics held on the device and published in groups, so a step never waits on a sync."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Iterator

import torch

#: a tensor (read back at flush), a number, or a callable evaluated after the flush's one sync
Value = torch.Tensor | float | Callable[[], float]
Row = tuple[int, dict[str, float]]
#: counts that add up when two rows of one step merge (the others: the later row's)
SUMMED = frozenset({"bytes_sent", "bytes_received"})


class MetricBuffer:
    """Collects (step, name → value) rows; `flush` reads all tensors back in one copy."""

    def __init__(self, publish: Callable[[list[Row]], None]) -> None:
        self._publish = publish
        self._rows: list[tuple[int, dict[str, Value]]] = []

    def add(self, step: int, values: dict[str, Value]) -> None:
        """Hold one step's values (tensors stay where they are).

        A second row for the held last step (an async worker that stepped twice in one of
        rank 0's steps) replaces it, its counts (SUMMED) added to the first's.
        """
        if self._rows and self._rows[-1][0] == step:
            held = self._rows[-1][1]
            for name in SUMMED.intersection(held, values):
                values[name] = _sum(held[name], values[name])
            self._rows[-1] = (step, values)
            return
        self._rows.append((step, values))

    def __len__(self) -> int:
        return len(self._rows)

    def flush(self, **extra: float) -> list[Row]:
        """Publish every held row (`extra` joins the last one); return them as plain floats."""
        if not self._rows:
            return []
        held, self._rows = self._rows, []
        held[-1][1].update(extra)
        # most values are host floats already: `type(v) is float` passes them at a pointer
        # compare, where isinstance against torch.Tensor's metaclass costs a slow lookup
        tensors = [
            _scalar(v)
            for _, row in held
            for v in row.values()
            if type(v) is not float and isinstance(v, torch.Tensor)
        ]
        numbers = iter(torch.stack(tensors).tolist() if tensors else [])
        rows = [
            (step, {k: v if type(v) is float else _plain(v, numbers) for k, v in row.items()})
            for step, row in held
        ]
        self._publish(rows)
        return rows


def _sum(first: Value, second: Value) -> Value:
    """Two counts added, read when the row is flushed."""
    return lambda: _now(first) + _now(second)


def _now(value: Value) -> float:
    if isinstance(value, torch.Tensor):
        return float(value.item())
    return float(value() if callable(value) else value)


def _scalar(value: torch.Tensor) -> torch.Tensor:
    """A detached 0-d float32 tensor; the engine's own values already are (no extra ops)."""
    if value.dtype is torch.float32 and value.dim() == 0 and not value.requires_grad:
        return value
    return value.detach().float().reshape(())


def _plain(value: Value, numbers: Iterator[float]) -> float:
    """A tensor's number (the next of `numbers`, read back in one copy), a callable's result."""
    if isinstance(value, torch.Tensor):
        return float(next(numbers))
    return float(value() if callable(value) else value)


class StepClock:
    """Phase boundaries of a step: host time on CPU, CUDA events on a GPU (no sync until read)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def mark(self) -> float | torch.cuda.Event:
        """A point in time on the device's own timeline."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    @staticmethod
    def between(
        start: float | torch.cuda.Event, end: float | torch.cuda.Event
    ) -> float | Callable[[], float]:
        """Seconds from start to end, read lazily for CUDA events."""
        if isinstance(start, float) and isinstance(end, float):
            return end - start
        assert isinstance(start, torch.cuda.Event) and isinstance(end, torch.cuda.Event)

        def read() -> float:
            end.synchronize()
            return start.elapsed_time(end) / 1000.0

        return read


def peak_memory_bytes(device: torch.device) -> float:
    """CUDA peak allocated bytes on a GPU, else the process's peak resident set size."""
    if device.type == "cuda":
        return float(torch.cuda.max_memory_allocated(device))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else peak * 1024)  # Linux reports KiB
