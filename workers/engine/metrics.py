"""Per-step metrics held on the device and published in groups, so a step never waits on a sync."""

from __future__ import annotations

from collections.abc import Callable

import torch

Value = torch.Tensor | float


class MetricBuffer:
    """Collects (step, name → value) rows; `flush` reads all tensors back in one copy."""

    def __init__(self, publish: Callable[..., None]) -> None:
        self._publish = publish
        self._rows: list[tuple[int, dict[str, Value]]] = []

    def add(self, step: int, **values: Value) -> None:
        """Hold one step's values (tensors stay where they are)."""
        self._rows.append((step, values))

    def __len__(self) -> int:
        return len(self._rows)

    def flush(self) -> dict[str, float]:
        """Publish every held row; return the last row as plain floats."""
        if not self._rows:
            return {}
        tensors = [
            v.detach().float().reshape(())
            for _, row in self._rows
            for v in row.values()
            if isinstance(v, torch.Tensor)
        ]
        numbers = iter(torch.stack(tensors).tolist() if tensors else [])
        last: dict[str, float] = {}
        for step, row in self._rows:
            last = {
                k: next(numbers) if isinstance(v, torch.Tensor) else float(v)
                for k, v in row.items()
            }
            self._publish(step, **last)
        self._rows.clear()
        return last
