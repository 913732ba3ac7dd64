"""Editing the job specs tests submit."""

from __future__ import annotations

import copy
from typing import Any


def with_field(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of spec with the dotted path (e.g. `parallelism.devices`) set to value."""
    changed = copy.deepcopy(spec)
    *parents, leaf = path.split(".")
    target = changed
    for key in parents:
        target = target.setdefault(key, {})
    target[leaf] = value
    return changed
