"""A platform stop is never the job's failure (#33 item 8), on real 2-rank mlp attempts.

The node agent shutting down cleanly (`trainboard up` or `trainboard worker` stopped) and a
node fencing its attempts because the control plane did not answer both end the attempt as
a platform fault: the control plane restarts the job without spending its max_restarts
(backend.jobs.attempt_end.restart_or_fail), and the reason says so in plain words.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from worker_helpers import attempt_order, mlp_spec, read_items, wait_for

from backend.jobs.attempt_end import AttemptEnd
from workers.contract.protocol import METRICS_STREAM, AttemptOutcome
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings

pytestmark = pytest.mark.slow  # starts real rank processes


def stopped_while_training(
    settings: SupervisorSettings, redis_url: str, stop: Callable[[Supervisor], object]
) -> AttemptOutcome:
    """A 2-rank mlp attempt run in a thread, `stop` applied to its supervisor once the ranks
    publish their first points; the attempt's outcome."""
    spec = mlp_spec(devices=2, hyperparameters={"steps": 100_000}, max_restarts=0)
    supervisor = Supervisor(attempt_order(spec), settings)
    outcomes: list[AttemptOutcome] = []
    thread = threading.Thread(target=lambda: outcomes.append(supervisor.run()))
    thread.start()
    wait_for(lambda: read_items(redis_url, METRICS_STREAM), timeout=90, what="the first points")
    stop(supervisor)
    thread.join(timeout=90)
    (outcome,) = outcomes
    return outcome


def test_a_clean_worker_shutdown_checkpoints_and_is_a_platform_fault_said_plainly(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    # what the node agent does for every attempt when it stops
    outcome = stopped_while_training(supervisor_settings, redis_url, Supervisor.shutdown)
    assert outcome.outcome == "failed" and outcome.platform_fault
    assert outcome.reason is not None
    assert outcome.reason.startswith("the worker node shut down while the attempt ran")
    assert "not counted against max_restarts" in outcome.reason
    # the ranks stopped as on a pause: a final checkpoint the next attempt resumes from
    assert outcome.last_checkpoint is not None and Path(outcome.last_checkpoint).is_dir()
    # and the control plane's rule list reads it as not the job's doing
    assert AttemptEnd.reported(outcome).platform_fault


def test_a_node_fenced_for_silence_of_the_control_plane_is_a_platform_fault(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    # what the heartbeat thread does once the lease ran out without an answer
    silence = (
        "Trainboard's API did not answer this node for 3 s, so the node stopped the job's ranks"
    )
    outcome = stopped_while_training(
        supervisor_settings, redis_url, lambda supervisor: supervisor.fence(silence)
    )
    assert outcome.outcome == "failed" and outcome.platform_fault, outcome.reason
    # in plain words, as the job page shows it: what happened, then that it costs no restart
    assert outcome.reason is not None and outcome.reason.startswith(f"{silence}; not counted")
    assert "fenced" not in outcome.reason
    assert "not counted against max_restarts" in outcome.reason
    assert outcome.last_checkpoint is None  # a fenced node no longer owns what it saved
    assert AttemptEnd.reported(outcome).platform_fault


def test_a_supervisor_signalled_under_slurm_still_counts_its_stop(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    """Slurm's SIGTERM may be the job's own doing (its time limit): not a platform stop."""
    outcome = stopped_while_training(  # what workers/node/slurm_step.py asks
        supervisor_settings, redis_url, lambda supervisor: supervisor.shutdown(platform_stop=False)
    )
    assert outcome.outcome == "failed" and not outcome.platform_fault
    assert outcome.reason == "the attempt's supervisor was told to stop (SIGTERM) while it ran"
    assert outcome.last_checkpoint is not None  # it still stopped with a final checkpoint


def signal_ranks(supervisor: Supervisor) -> None:
    """SIGTERM straight to the ranks, not through the supervisor: what Slurm's time limit and
    an operator's kill send."""
    for process in supervisor.processes:
        process.send_signal(signal.SIGTERM)


def test_ranks_stopped_by_a_sigterm_nobody_explains_did_not_finish(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    """They save and exit 0, as finished ranks do: before, that read "succeeded"."""
    settings = dataclasses.replace(supervisor_settings, outside_stop_wait_seconds=1.0)
    outcome = stopped_while_training(settings, redis_url, signal_ranks)
    assert outcome.outcome == "failed" and not outcome.platform_fault, outcome
    assert outcome.reason == (
        "rank 0, 1 stopped on a SIGTERM that Trainboard did not send (an operator, the system "
        "or the cluster manager) before the attempt finished"
    )
    assert outcome.exit_codes == [0, 0]
    assert outcome.last_checkpoint is not None  # the stop's checkpoint, to restart from


def test_ranks_signalled_before_their_supervisor_wait_for_its_cause(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    """Slurm's time limit signals the ranks and the step alike; the ranks can save and exit
    before the step has read the cause from the controller (seconds): the supervisor waits
    for it, so the attempt fails with Slurm's reason, not "succeeded"."""
    limit = "Slurm: TIMEOUT: Slurm job 7 reached its time limit (TimeLimit=00:01:00)"

    def signalled_then_explained(supervisor: Supervisor) -> None:
        signal_ranks(supervisor)
        wait_for(
            lambda: all(p.poll() is not None for p in supervisor.processes),
            timeout=60,
            what="the ranks to save and exit",
        )
        time.sleep(1.0)  # the step still asks the controller
        supervisor.shutdown(platform_stop=False, reason=limit)  # what slurm_step then does

    outcome = stopped_while_training(supervisor_settings, redis_url, signalled_then_explained)
    assert outcome.outcome == "failed" and not outcome.platform_fault, outcome
    assert outcome.reason == limit
    assert outcome.last_checkpoint is not None
