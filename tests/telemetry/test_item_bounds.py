"""Hostile telemetry items are refused one by one, never able to fail a batch or bloat rows."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from backend.telemetry.ingest.consumer import Ingest
from backend.telemetry.ingest.entries import ITEM_ADAPTERS, TYPED_BATCHES
from workers.contract.protocol import (
    BATCH_FIELD,
    DEVICES_STREAM,
    METRICS_STREAM,
    AttemptEvent,
    DeviceSample,
    LogLine,
    MetricPoint,
)

GOOD = {"attempt_id": 1, "rank": 0, "step": 5, "name": "loss", "value": 1.0, "time": 1.0}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("step", 2**31),
        ("step", -1),
        ("rank", 2**40),
        ("attempt_id", 0),
        ("attempt_id", 10**30),
        ("name", ""),
        ("name", "x" * 129),
    ],
)
def test_metric_points_out_of_bounds_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MetricPoint.model_validate({**GOOD, field: value})


def test_other_items_bound_their_integers_and_text() -> None:
    with pytest.raises(ValidationError):
        LogLine(attempt_id=1, rank=0, seq=2**31, line="x", time=1.0)
    with pytest.raises(ValidationError):
        LogLine(attempt_id=1, rank=0, seq=1, line="x" * 8193, time=1.0)
    with pytest.raises(ValidationError):
        AttemptEvent(attempt_id=1, kind="checkpoint", step=2**31, time=1.0)
    with pytest.raises(ValidationError):
        DeviceSample(node="n", device=2**31, kind="cpu", time=1.0)
    assert MetricPoint.model_validate({**GOOD, "step": 2**31 - 1}).step == 2**31 - 1


HOSTILE_METRICS = [
    {"step": 2**31},
    {"step": -1},
    {"rank": 2**40},
    {"attempt_id": 0},
    {"attempt_id": 10**30},
    {"name": ""},
    {"name": "x" * 129},
    {"time": float("nan")},
    {"time": float("-inf")},
    {"value": "not a number"},
]


@pytest.mark.parametrize("bad", HOSTILE_METRICS)
def test_the_ingest_validators_refuse_each_hostile_metric(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ITEM_ADAPTERS[METRICS_STREAM].validate_python({**GOOD, **bad})
    entry = json.dumps({"producer": "p", "seq": 0, "items": [{**GOOD, **bad}]})
    with pytest.raises(ValidationError):
        TYPED_BATCHES[METRICS_STREAM].validate_json(entry)


def test_one_hostile_item_is_refused_alone_and_the_rest_of_its_batch_kept() -> None:
    items = [{**GOOD, "step": s} for s in range(5)]
    items[2] = {**GOOD, "step": 2**31}
    items.append({"unrelated": True})
    entry = json.dumps({"producer": "p", "seq": 0, "items": items, "dropped": 0})
    ingest = Ingest(db=None, client=None, consumer="t")  # type: ignore[arg-type]
    parsed = ingest._parse(METRICS_STREAM, {BATCH_FIELD.encode(): entry.encode()})
    assert [p.step for p in parsed] == [0, 1, 3, 4]
    assert all(set(p.__struct_fields__) == set(MetricPoint.model_fields) for p in parsed)


def test_a_malformed_envelope_is_dropped_whole() -> None:
    ingest = Ingest(db=None, client=None, consumer="t")  # type: ignore[arg-type]
    for raw in (b"{not json", b'{"producer": "p", "seq": 0, "items": [1]}', b'{"items": []}'):
        assert ingest._parse(METRICS_STREAM, {BATCH_FIELD.encode(): raw}) == []


def test_optional_device_fields_get_their_defaults_and_keep_their_bounds() -> None:
    sample = {"node": "n", "device": 0, "kind": "gpu", "time": 1.0}
    entry = json.dumps({"producer": "a", "seq": 0, "items": [sample]})
    ingest = Ingest(db=None, client=None, consumer="t")  # type: ignore[arg-type]
    (parsed,) = ingest._parse(DEVICES_STREAM, {BATCH_FIELD.encode(): entry.encode()})
    assert parsed == DeviceSample.model_validate(sample).model_dump()
    hostile = (
        {"mem_used": -1},
        {"util": float("nan")},
        {"rank": 2**31},
        {"kind": "tpu"},
        {"processes": [{"pid": -1}]},
        {"processes": [{"pid": 1, "attempt_id": 2**31}]},
        {"xids": list(range(65))},
    )
    for bad in hostile:
        with pytest.raises(ValidationError):
            ITEM_ADAPTERS[DEVICES_STREAM].validate_python({**sample, **bad})
