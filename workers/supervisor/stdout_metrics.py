"""Zero-code metrics: numbers in a plain script's stdout lines become metric points."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from time import time as now

from workers.contract.protocol import MetricPoint
from workers.telemetry import StreamPublisher

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"

#: default patterns: each has groups `name` and `value` and may match several times a line
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"(?P<name>(?:(?:train|training|val|valid|validation|test|eval)[ _])?"
    r"(?:loss|acc|accuracy|ppl|perplexity))\s*[:=]?\s*(?P<value>" + _NUMBER + r")",
    r"\b(?P<name>lr|learning[ _]rate|grad[ _]norm)\s*[:=]?\s*(?P<value>" + _NUMBER + r")",
)
#: where a line states its step; a line without one gets the metric's next count
DEFAULT_STEP_PATTERN = r"\b(?:step|iter|iteration)\s*[:=#]?\s*(?P<step>\d+)"


class StdoutMetrics:
    """Parses one rank's stdout lines into (step, name, value) points."""

    def __init__(
        self, patterns: Sequence[str] = DEFAULT_PATTERNS, step_pattern: str = DEFAULT_STEP_PATTERN
    ) -> None:
        self.patterns = [re.compile(p, re.IGNORECASE) for p in patterns]
        for pattern in self.patterns:
            if not {"name", "value"} <= set(pattern.groupindex):
                raise ValueError(f"metric pattern {pattern.pattern!r} needs groups name and value")
        self.step_pattern = re.compile(step_pattern, re.IGNORECASE)
        self._counts: defaultdict[str, int] = defaultdict(int)

    def parse(self, line: str) -> list[tuple[int, str, float]]:
        """The points a line states; a metric seen twice in one line keeps its first value."""
        found: dict[str, float] = {}
        for pattern in self.patterns:
            for match in pattern.finditer(line):
                name = re.sub(r"[ _]+", "_", match["name"].lower())
                found.setdefault(name, float(match["value"]))
        if not found:
            return []
        stated = self.step_pattern.search(line)
        points = []
        for name, value in found.items():
            self._counts[name] += 1
            step = int(stated["step"]) if stated else self._counts[name]
            points.append((step, name, value))
        return points


def metric_sink(
    parser: StdoutMetrics,
    publisher: StreamPublisher,
    *,
    attempt_id: int,
    rank: int,
    on_step: Callable[[int], None],
) -> Callable[[str], None]:
    """What turns one rank's stdout lines into published metric points (each step is progress)."""

    def sink(line: str) -> None:
        for step, name, value in parser.parse(line):
            publisher.add(
                MetricPoint(
                    attempt_id=attempt_id, rank=rank, step=step, name=name, value=value, time=now()
                )
            )
            on_step(step)

    return sink
