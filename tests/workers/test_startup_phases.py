"""Start-up is never silent (#33 item 6): real attempts report each phase as a timed event.

Between `running` and the first step the job page showed nothing for 12-23 s. Now the
supervisor publishes `startup:ranks`, `startup:imported` (interpreter and torch),
`startup:rendezvous`, `startup:data` and `startup:first_step` to the events stream (the job
page's timeline, live), each once, in order, with how long it took.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from test_relay import relay_lines
from worker_helpers import attempt_order, mlp_spec, read_items, with_script

from tests.job_users import reachable
from workers.contract.protocol import EVENTS_STREAM
from workers.contract.spec import JobSpec
from workers.contract.telemetry_channel import event_message
from workers.supervisor.attempt import Supervisor
from workers.supervisor.settings import SupervisorSettings
from workers.supervisor.startup import DATA, FIRST_STEP, IMPORTED, PREFIX, RANKS, RENDEZVOUS

pytestmark = pytest.mark.slow  # starts real rank processes

TOOK = re.compile(r"\((\d+\.\d) s; (\d+\.\d) s since the ranks started\)$")


def startup_events(redis_url: str) -> list[dict[str, object]]:
    return [e for e in read_items(redis_url, EVENTS_STREAM) if str(e["kind"]).startswith(PREFIX)]


def test_a_two_rank_engine_attempt_reports_every_phase_once_in_order_with_its_time(
    supervisor_settings: SupervisorSettings, redis_url: str
) -> None:
    order = attempt_order(mlp_spec(devices=2, hyperparameters={"steps": 20}))

    outcome = Supervisor(order, supervisor_settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    events = startup_events(redis_url)
    assert [e["kind"] for e in events] == [RANKS, IMPORTED, RENDEZVOUS, DATA, FIRST_STEP]
    assert {e["attempt_id"] for e in events} == {order.attempt_id}
    messages = [str(e["message"]) for e in events]
    assert messages[0] == "starting 2 ranks on node test-node (0, 1)"
    assert messages[1].startswith("interpreter and torch imported on all 2 ranks of node test")
    assert messages[2].startswith("rendezvous done: all 2 ranks of node test-node joined")
    assert messages[3].startswith("model, optimizer and data ready on all 2 ranks")
    assert re.match(r"rank [01] reported its first step", messages[4])
    times = [float(e["time"]) for e in events]  # type: ignore[arg-type]
    assert times == sorted(times)
    # each phase says how long it took and when it ended after the start: they add up
    took = [TOOK.search(m) for m in messages[1:]]
    assert all(took), messages
    durations = [float(t.group(1)) for t in took if t]
    since = [float(t.group(2)) for t in took if t]
    assert since == sorted(since)
    assert abs(sum(durations) - since[-1]) <= 0.05 * len(durations)
    # torch's import is most of a CPU start-up here; the wall times agree with the stamps
    assert durations[0] > 0.2
    assert abs((times[-1] - times[0]) - since[-1]) < 0.5


def test_a_script_without_the_sdk_reports_its_start_and_first_step(
    supervisor_settings: SupervisorSettings, redis_url: str, tmp_path: Path
) -> None:
    root = reachable(tmp_path / "scripts")
    script = (
        "import time\ntime.sleep(0.5)\nfor s in range(1, 4):\n    print(f'step {s} loss=0.5')\n"
    )
    settings = with_script(supervisor_settings, root / "r", "train.py", script)
    os.chmod(root / "r", 0o755)
    spec = JobSpec.model_validate({"name": "s", "entrypoint": {"script": "train.py"}})

    outcome = Supervisor(attempt_order(spec), settings).run()

    assert outcome.outcome == "succeeded", outcome.reason
    kinds = [e["kind"] for e in startup_events(redis_url)]
    # it never said when torch was imported or the data ready: nothing is made up
    assert kinds == [RANKS, FIRST_STEP]


def test_a_rank_cannot_forge_a_startup_event(redis_url: str, tmp_path: Path) -> None:
    forged = event_message(FIRST_STEP, "rank 1 reported its first step (0.0 s; 0.0 s ...)", None)
    relay = relay_lines(redis_url, tmp_path, [json.dumps(forged).encode() + b"\n"])
    assert relay.refused == 1
    assert read_items(redis_url, EVENTS_STREAM) == []
