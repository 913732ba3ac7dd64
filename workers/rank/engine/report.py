"""The periodic report: held metrics go out, and every rank agrees on NaN, stop and time votes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from workers.rank.engine.distributed import ParallelContext
from workers.rank.engine.metrics import Row

#: most steps between reports: metric read-back (one device sync), NaN check, stop vote
REPORT_EVERY = 100
#: a report about this often (fewer steps between reports when steps are slow): live charts
#: lag by about this, and a stop is honoured within it. Each report costs a collective, a
#: progress line and a device read-back, too many on fast steps (docs/benchmarks.md)
REPORT_SECONDS = 0.25
#: encodes "the earliest bad step" into a MAX all-reduce (larger = earlier)
_NO_STEP = 2**40


#: a check of this rank's weights taken after a step: (step, the sum of every weight)
Check = tuple[int, float]


@dataclass(frozen=True)
class Votes:
    """What every rank agreed on at a report."""

    #: the earliest step any rank saw a NaN/Inf at, None when all were finite
    bad_step: int | None
    #: with a bad step, the last step before it after which every rank's weights are known
    #: finite: a batch of the steps after it, up to the bad step, made the NaN/Inf
    clean_step: int | None
    stop: bool
    time_due: bool
    #: the last loss of the rank that reports it (dp rank 0 of the loss stage), else -inf
    loss: float
    #: steps until the next report, from the slowest rank's step time
    report_every: int


def steps_between_reports(step_seconds: float) -> int:
    """About REPORT_SECONDS of steps this long, at most REPORT_EVERY."""
    return max(1, min(REPORT_EVERY, int(REPORT_SECONDS / max(step_seconds, 1e-9))))


def first_bad(rows: list[Row], checks: list[Check]) -> int | None:
    """The earliest step with a NaN/Inf in its row (loss, gradient norm...) or its weights."""
    bad = [s for s, total in checks if not math.isfinite(total)]
    bad.append(next((s for s, r in rows if not all(map(math.isfinite, r.values()))), _NO_STEP))
    earliest = min(bad)
    return None if earliest == _NO_STEP else earliest


def last_clean(rows: list[Row], checks: list[Check], *, start: int, before: int) -> int:
    """The last step before `before` after which this rank's weights are known finite.

    `start` (the last report's step, whose weights were checked) is; so is a step whose
    weights were checked finite, and a step whose gradient norm was measured right after a
    known one: finite weights and finite gradients make finite weights. Every value before
    `before` is finite (it is at most the first bad step). Any other step may have left a
    NaN that only later steps show: its gradients were not looked at.
    """
    checked = {step for step, total in checks if math.isfinite(total)}
    clean = previous = start
    for step, row in rows:
        if step >= before:
            break
        if step in checked or ("grad_norm" in row and clean == previous):
            clean = step
        previous = step
    return clean


def agree(
    ctx: ParallelContext,
    rows: list[Row],
    *,
    has_loss: bool,
    stop: bool,
    time_due: bool,
    paced: bool = True,
    checks: list[Check] | None = None,
    clean_from: int = 0,
) -> Votes:
    """One collective over the gang: NaN seen, the loss to print, stop and time votes, pace.

    `paced`: this rank's step time sets the pace (not an async worker's: rank 0's steps do).
    `checks`: this rank's weight checks since the last report (`clean_from`, its step). When
    any rank saw a NaN/Inf, a second collective agrees on the last step known clean.
    """
    checks = checks or []
    bad = first_bad(rows, checks)
    designated = has_loss and ctx.dp_rank == 0 and bool(rows)
    loss = rows[-1][1].get("loss", -math.inf) if designated else -math.inf
    step_time = max((r["step_time"] for _, r in rows), default=0.0) if paced else 0.0
    any_bad, earliest, loss, stop_vote, time_vote, step_time = ctx.max_all(
        float(bad is not None),
        _NO_STEP - bad if bad is not None else 0.0,
        loss,
        float(stop),
        float(time_due),
        step_time,
    )
    bad_step = clean_step = None
    if any_bad:  # every rank is here: agree on the steps whose batches made it
        bad_step = int(_NO_STEP - earliest)
        clean = last_clean(rows, checks, start=clean_from, before=bad_step)
        (latest,) = ctx.max_all(float(_NO_STEP - clean))  # the earliest rank's
        clean_step = int(_NO_STEP - latest)
    return Votes(
        bad_step=bad_step,
        clean_step=clean_step,
        stop=stop_vote > 0,
        time_due=time_vote > 0,
        loss=loss,
        report_every=steps_between_reports(step_time),
    )


def progress_line(
    ctx: ParallelContext, *, step: int, total: int, row: dict[str, float], loss: float
) -> str:
    """The report's log line: the leader's names the gang's loss, another rank's its own."""
    if ctx.is_leader:
        return f"step {step}/{total} loss {loss:.4f} lr {row['lr']:.4g}"
    own = f" local loss {row['loss']:.4f}" if "loss" in row else ""
    return f"rank {ctx.rank} step {step}/{total}{own} step time {row['step_time']:.4f} s"
