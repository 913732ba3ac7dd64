"""Failures the engine explains itself: the supervisor reports their reason as the attempt's."""

from __future__ import annotations


class EngineFailure(Exception):
    """The attempt cannot go on, for a reason the user should read as is.

    A subclass with `final = True` fails the job at once (EXIT_FINAL): no restart can fix it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Diverged(EngineFailure):
    """The loss or the gradients became NaN or infinite and the NaN policy gave up."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"diverged: {detail}")


class RendezvousFailed(EngineFailure):
    """The ranks could not all meet within the spec's rendezvous bound: a platform fault.

    Its reason names the address that could not be reached; the restart it causes does
    not spend the job's `max_restarts` (the supervisor reports it with EXIT_PLATFORM).
    """

    platform_fault = True


class CheckpointIncomplete(EngineFailure):
    """A checkpoint's shards are not all where rank 0 sees them: it is never recorded."""


class PauseForDiskFull(EngineFailure):
    """A checkpoint found no space and the spec says `on_disk_full: pause`: pause the job.

    Its reason names the node and the space left; the job resumes from its last checkpoint.
    """


class CheckpointNoSpace(Exception):
    """A checkpoint could not be written for lack of space; its partial folder is gone.

    Not an EngineFailure: training goes on, and the next interval tries again.
    """
