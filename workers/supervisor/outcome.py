"""How an attempt ended, as its supervisor reports it to the control plane."""

from __future__ import annotations

from pathlib import Path

from workers.contract.checkpoints import newest_checkpoint
from workers.contract.oom import recognise
from workers.contract.protocol import AttemptOutcome


def attempt_outcome(
    *,
    failed: str | None,
    stop_reason: str | None,
    fenced: str | None,
    platform_fault: bool,
    codes: list[int],
    checkpoint_dir: Path,
) -> AttemptOutcome:
    """The outcome: failed (with why), stopped on request, or succeeded; its newest checkpoint.

    A fenced attempt reports no checkpoint: the node no longer owned it when it ended.
    """
    checkpoint = newest_checkpoint(checkpoint_dir)
    last = str(checkpoint.resolve()) if checkpoint else None
    if fenced is not None:
        failed, last = f"fenced: {fenced}", None
    elif stop_reason == "shutdown":
        failed = failed or "the worker node shut down while the attempt ran"
    if failed is not None:
        # a user script's MemoryError, too, reads "out of memory: ..." (the prefix fits 4096)
        failed = recognise(failed[-4000:])
        outcome = AttemptOutcome(outcome="failed", reason=failed[-4096:], exit_codes=codes)
        outcome.platform_fault = platform_fault and fenced is None
    elif stop_reason is not None:
        reason = f"stopped on {stop_reason} request"
        outcome = AttemptOutcome(outcome="stopped", reason=reason, exit_codes=codes)
    else:
        outcome = AttemptOutcome(outcome="succeeded", reason=None, exit_codes=codes)
    outcome.last_checkpoint = last
    return outcome
