"""The public name of the SDK a training script imports: ``from workers import sdk``.

The code lives in `workers.rank.sdk` (it runs inside rank processes, outside the trust
boundary); this module keeps the documented import stable.
"""

from workers.rank.sdk import (
    checkpoint_dir,
    event,
    flush,
    phase,
    report,
    report_many,
    resume_step,
    should_stop,
)

__all__ = [
    "checkpoint_dir",
    "event",
    "flush",
    "phase",
    "report",
    "report_many",
    "resume_step",
    "should_stop",
]
