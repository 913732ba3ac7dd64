"""How an attempt ended, as its supervisor reports it to the control plane."""

from __future__ import annotations

from pathlib import Path

from workers.contract.checkpoints import newest_checkpoint
from workers.contract.oom import recognise
from workers.contract.protocol import AttemptOutcome

#: what a platform stop's reason says, in the words the job page shows
NODE_SHUT_DOWN = "the worker node shut down while the attempt ran (a platform stop)"
NOT_COUNTED = "not counted against max_restarts: it resumes from its newest checkpoint"


def attempt_outcome(
    *,
    failed: str | None,
    stop_reason: str | None,
    fenced: str | None,
    platform_fault: bool,
    platform_stop: bool = True,
    platform_reason: str | None = None,
    codes: list[int],
    checkpoint_dir: Path,
) -> AttemptOutcome:
    """The outcome: failed (with why), stopped on request, or succeeded; its newest checkpoint.

    A fenced attempt reports no checkpoint: the node no longer owned it when it ended.
    A platform stop (the node agent shut down, or fenced its attempts because the control
    plane did not answer) is never the job's failure: it is reported as a platform fault,
    which restarts the job without spending its max_restarts, and its reason says so
    (`platform_reason`: why the platform stopped it, e.g. Slurm preempting its job; by
    default the node shutting down). A stop that is not the platform's counts as a failure,
    with `platform_reason` as its reason when one was given (Slurm's time limit).
    """
    checkpoint = newest_checkpoint(checkpoint_dir)
    last = str(checkpoint.resolve()) if checkpoint else None
    if fenced is not None:
        # `fenced` says what happened in words (no "fenced:" jargon on the job's page)
        failed, last = f"{fenced}; {NOT_COUNTED}", None
        platform_fault = True
    elif stop_reason == "shutdown" and platform_stop:
        # whatever the ranks did once asked to stop follows from the stop
        why = platform_reason or NODE_SHUT_DOWN
        failed = f"{why}; {NOT_COUNTED}" + (f" (then: {failed})" if failed else "")
        platform_fault = True
    elif stop_reason == "shutdown" and platform_reason:  # the job's own doing (a time limit)
        failed = platform_reason + (f" (then: {failed})" if failed else "")
    elif stop_reason == "shutdown":  # signalled, maybe for the job's sake (a time limit)
        failed = failed or "the attempt's supervisor was told to stop (SIGTERM) while it ran"
    if failed is not None:
        # a user script's MemoryError, too, reads "out of memory: ..." (the prefix fits 4096)
        failed = recognise(failed[-4000:])
        outcome = AttemptOutcome(outcome="failed", reason=failed[-4096:], exit_codes=codes)
        outcome.platform_fault = platform_fault
    elif stop_reason is not None:
        reason = f"stopped on {stop_reason} request"
        outcome = AttemptOutcome(outcome="stopped", reason=reason, exit_codes=codes)
    else:
        outcome = AttemptOutcome(outcome="succeeded", reason=None, exit_codes=codes)
    outcome.last_checkpoint = last
    return outcome
