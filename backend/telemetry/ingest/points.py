"""A batch of metric points as numpy columns, taken once from the validated items.

The writer filters, groups and advances steps on these columns and the PostgreSQL COPY is
built from them, instead of a Python loop over the items for each of those. The items are
dicts or (from the ingest's fast decoder) Structs with the same fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any, overload

import numpy as np


@dataclass(frozen=True)
class Points(Sequence[Any]):
    """Metric point items and their columns, in the dtypes of metric_points' columns.

    As a sequence it is its rows (the items: dicts, or all Structs).
    """

    rows: list[Any]
    attempt_id: np.ndarray
    rank: np.ndarray
    step: np.ndarray
    name: list[str]
    value: np.ndarray
    time: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[Any] | Points) -> Points:
        """The columns of rows (each a dict, or each a Struct, with every MetricPoint field
        but id and mark)."""
        if isinstance(rows, Points):
            return rows
        count = len(rows)
        field = itemgetter if count and isinstance(rows[0], dict) else attrgetter

        def column(key: str, dtype: type) -> np.ndarray:
            # fromiter refuses an integer out of the column's range
            return np.fromiter(map(field(key), rows), dtype=dtype, count=count)

        return cls(
            rows=list(rows),
            attempt_id=column("attempt_id", np.int32),
            rank=column("rank", np.int32),
            step=column("step", np.int32),
            name=list(map(field("name"), rows)),
            value=column("value", np.float64),
            time=column("time", np.float64),
        )

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self.rows[index]

    def dicts(self) -> list[dict[str, Any]]:
        """The rows as dicts of their columns' values (for an insert of a few rows)."""
        columns = [self.attempt_id, self.rank, self.step, self.name, self.value, self.time]
        values = [c.tolist() if isinstance(c, np.ndarray) else c for c in columns]
        keys = ("attempt_id", "rank", "step", "name", "value", "time")
        return [dict(zip(keys, row, strict=True)) for row in zip(*values, strict=True)]

    def where(self, keep: np.ndarray) -> Points:
        """The points where keep (one bool each) is true."""
        if keep.all():
            return self
        index = np.flatnonzero(keep)
        picked = index.tolist()
        return Points(
            rows=[self.rows[i] for i in picked],
            attempt_id=self.attempt_id[index],
            rank=self.rank[index],
            step=self.step[index],
            name=[self.name[i] for i in picked],
            value=self.value[index],
            time=self.time[index],
        )

    def groups(self, keys: np.ndarray) -> dict[int, np.ndarray]:
        """Row indexes by key (one integer key per row), each in row order."""
        if not len(keys):
            return {}
        if (keys == keys[0]).all():  # the common case, without a sort
            return {int(keys[0]): np.arange(len(keys))}
        order = np.argsort(keys, kind="stable")
        starts = np.flatnonzero(np.r_[True, keys[order][1:] != keys[order][:-1]])
        ends = np.r_[starts[1:], len(order)]
        return {int(keys[order[a]]): order[a:b] for a, b in zip(starts, ends, strict=True)}

    def series_marks(self) -> np.ndarray:
        """One bool per row: true for the first lowest-step row of each (attempt_id, name)."""
        names = dict.fromkeys(self.name, 0)
        for code, name in enumerate(names):
            names[name] = code
        codes = np.fromiter(map(names.__getitem__, self.name), np.int64, len(self.name))
        series = self.attempt_id.astype(np.int64) * len(names) + codes
        marks = np.zeros(len(self), dtype=bool)
        for rows in self.groups(series).values():
            marks[rows[np.argmin(self.step[rows])]] = True
        return marks
