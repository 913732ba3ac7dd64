"""The engine's start event carries what it uses; the relay passes only facts that fit."""

from __future__ import annotations

import json
from pathlib import Path

from test_relay import relay_lines
from worker_helpers import read_items

from tests.telemetry.helpers import FACTS
from workers.contract.protocol import EVENTS_STREAM
from workers.contract.telemetry_channel import event_message


def test_a_start_event_carries_its_facts_and_facts_that_do_not_fit_are_dropped(
    redis_url: str, tmp_path: Path
) -> None:
    events = [
        event_message("started", "training on 1 device", 40, FACTS),
        event_message("started", "bad", 0, {**FACTS, "global_batch": 0}),
        event_message("started", "worse", 1, {**FACTS, "world_size": "two"}),
        event_message("warning", "facts only ride a start event", 2, FACTS),
    ]
    relay = relay_lines(redis_url, tmp_path, [json.dumps(e).encode() + b"\n" for e in events])
    published = read_items(redis_url, EVENTS_STREAM)
    assert [(e["kind"], e["step"], e.get("facts")) for e in published] == [
        ("started", 40, FACTS),
        ("started", 0, None),
        ("started", 1, None),
        ("warning", 2, None),
    ]
    assert relay.refused == 2
