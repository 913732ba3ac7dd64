"""The supervisor's end of a rank's pipe: only valid items pass, stamped with the pipe's rank."""

from __future__ import annotations

import json
import os
import select
from pathlib import Path

from worker_helpers import read_items

from workers.contract.protocol import EVENTS_STREAM, METRICS_STREAM
from workers.contract.telemetry_channel import (
    MAX_LINE_BYTES,
    POINTS_KEY,
    event_message,
    points_message,
)
from workers.rank.channel import TelemetryChannel
from workers.supervisor.relay import TelemetryRelay
from workers.telemetry import StreamPublisher


def relay_lines(redis_url: str, checkpoints: Path, lines: list[bytes]) -> TelemetryRelay:
    """Feed raw lines through a real pipe to a relay for attempt 7, rank 1; wait until read."""
    read_fd, write_fd = os.pipe()
    metrics = StreamPublisher(redis_url, METRICS_STREAM, "test-metrics")
    events = StreamPublisher(redis_url, EVENTS_STREAM, "test-events")
    relay = TelemetryRelay(
        read_fd, attempt_id=7, rank=1, metrics=metrics, events=events, checkpoint_dir=checkpoints
    )
    with os.fdopen(write_fd, "wb") as pipe:
        for line in lines:
            pipe.write(line)
    relay.join(timeout=10)
    metrics.close()
    events.close()
    return relay


def test_points_are_stamped_with_the_pipes_attempt_and_rank(redis_url: str, tmp_path: Path) -> None:
    forged = {"m": [[3, "loss", 0.5]], "attempt_id": 99, "rank": 5}
    relay = relay_lines(redis_url, tmp_path, [json.dumps(forged).encode() + b"\n"])
    points = read_items(redis_url, METRICS_STREAM)
    assert [(p["attempt_id"], p["rank"], p["step"], p["name"], p["value"]) for p in points] == [
        (7, 1, 3, "loss", 0.5)
    ]
    assert relay.refused == 0


def test_malformed_items_are_refused_one_by_one_and_the_rest_pass(
    redis_url: str, tmp_path: Path
) -> None:
    bad_rows = [
        [True, "loss", 1.0],  # a bool is not a step
        [-1, "loss", 1.0],
        [2**31, "loss", 1.0],
        [1, "", 1.0],
        [1, "x" * 129, 1.0],
        [1, "loss", "1.0"],
        [1, "loss"],
        "row",
    ]
    lines = [
        b"not json\n",
        b"[1, 2, 3]\n",
        json.dumps({"m": "points"}).encode() + b"\n",
        json.dumps({"m": [*bad_rows, [4, "loss", 0.25]]}).encode() + b"\n",
        b"{" * (MAX_LINE_BYTES + 10) + b"\n",  # too long: dropped whole, not parsed in parts
        json.dumps(points_message([(5, {"acc": 0.9})])).encode() + b"\n",
    ]
    relay = relay_lines(redis_url, tmp_path, lines)
    points = read_items(redis_url, METRICS_STREAM)
    assert [(p["step"], p["name"]) for p in points] == [(4, "loss"), (5, "acc")]
    assert relay.refused == 3 + len(bad_rows) + 1


def test_a_checkpoint_event_counts_only_inside_the_jobs_checkpoint_dir(
    redis_url: str, tmp_path: Path
) -> None:
    checkpoints = tmp_path / "job-1" / "checkpoints"
    (checkpoints / "step-10").mkdir(parents=True)
    elsewhere = tmp_path / "job-2" / "checkpoints" / "step-99"
    elsewhere.mkdir(parents=True)
    (checkpoints / "step-20").symlink_to(elsewhere)
    events = [
        event_message("checkpoint", str(checkpoints / "step-10"), 10),
        event_message("checkpoint", str(elsewhere), 99),
        event_message("checkpoint", str(checkpoints / "step-20"), 20),  # a link out
        event_message("checkpoint", str(checkpoints / ".." / ".." / "job-2"), 1),
        event_message("checkpoint", str(checkpoints / "step-30"), 30),  # does not exist
        event_message("rollback", "loss was NaN", 11),
        {"e": {"kind": "x" * 65, "message": ""}},
    ]
    relay = relay_lines(redis_url, checkpoints, [json.dumps(e).encode() + b"\n" for e in events])
    published = read_items(redis_url, EVENTS_STREAM)
    assert [(e["attempt_id"], e["kind"], e["step"]) for e in published] == [
        (7, "checkpoint", 10),
        (7, "rollback", 11),
    ]
    assert relay.refused == 5


def test_the_rank_side_channel_writes_lines_the_relay_reads(redis_url: str, tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    metrics = StreamPublisher(redis_url, METRICS_STREAM, "test-metrics")
    events = StreamPublisher(redis_url, EVENTS_STREAM, "test-events")
    relay = TelemetryRelay(
        read_fd, attempt_id=3, rank=0, metrics=metrics, events=events, checkpoint_dir=tmp_path
    )
    channel = TelemetryChannel(write_fd)
    channel.send(points_message([(1, {"loss": 2.0, "lr": 0.1}), (2, {"loss": 1.5})]))
    channel.close()
    channel.send(points_message([(3, {"loss": 1.0})]))  # after close: dropped, no error
    relay.join(timeout=10)
    metrics.close()
    events.close()
    points = read_items(redis_url, METRICS_STREAM)
    assert [(p["step"], p["name"], p["value"]) for p in points] == [
        (1, "loss", 2.0),
        (1, "lr", 0.1),
        (2, "loss", 1.5),
    ]


def test_progress_reaches_the_hang_watch_and_a_rank_cannot_forge_a_hang(
    redis_url: str, tmp_path: Path
) -> None:
    from workers.contract.telemetry_channel import progress_message
    from workers.supervisor.hang_watch import HangWatch

    watch = HangWatch([1], timeout=5.0)
    read_fd, write_fd = os.pipe()
    metrics = StreamPublisher(redis_url, METRICS_STREAM, "test-metrics")
    events = StreamPublisher(redis_url, EVENTS_STREAM, "test-events")
    relay = TelemetryRelay(
        read_fd,
        attempt_id=7,
        rank=1,
        metrics=metrics,
        events=events,
        checkpoint_dir=tmp_path,
        watch=watch,
    )
    lines = [
        progress_message("collective", stacks=True),
        points_message([(4, {"loss": 1.0})]),
        event_message("hung", "forged", None),
        {"p": {"phase": "x" * 65, "stacks": True}},
    ]
    with os.fdopen(write_fd, "wb") as pipe:
        for line in lines:
            pipe.write(json.dumps(line).encode() + b"\n")
    relay.join(timeout=10)
    metrics.close()
    events.close()
    assert watch.stacks_from([1]) == [1] and relay.refused == 2
    assert read_items(redis_url, EVENTS_STREAM) == []


def test_the_rank_side_queues_reports_and_a_flush_delivers_them_in_order(
    redis_url: str, tmp_path: Path
) -> None:
    read_fd, write_fd = os.pipe()
    metrics = StreamPublisher(redis_url, METRICS_STREAM, "test-metrics")
    events = StreamPublisher(redis_url, EVENTS_STREAM, "test-events")
    relay = TelemetryRelay(
        read_fd, attempt_id=3, rank=0, metrics=metrics, events=events, checkpoint_dir=tmp_path
    )
    channel = TelemetryChannel(write_fd, flush_interval=60.0)  # one write, then none on its own
    for step in range(1, 1001):  # more than a batch: the writer wakes early, order is kept
        channel.send(points_message([(step, {"loss": 1.0 / step})]))
    channel.flush()
    channel.close()
    relay.join(timeout=10)
    metrics.close()
    events.close()
    assert [p["step"] for p in read_items(redis_url, METRICS_STREAM)] == list(range(1, 1001))


def test_a_report_to_an_idle_rank_channel_is_written_at_once_and_a_second_waits_its_window() -> (
    None
):
    """The window is leading-edge: what comes to an idle writer goes out without waiting."""
    read_fd, write_fd = os.pipe()
    channel = TelemetryChannel(write_fd, flush_interval=60.0)
    with os.fdopen(read_fd, "rb") as pipe:
        channel.send(points_message([(1, {"loss": 1.0})]))
        assert select.select([pipe], [], [], 30)[0], "the first report waited for its window"
        assert json.loads(pipe.readline())[POINTS_KEY] == [[1, "loss", 1.0]]
        channel.send(points_message([(2, {"loss": 0.5})]))
        assert not select.select([pipe], [], [], 0.2)[0]  # within 60 s of the first write
        channel.flush()
        assert json.loads(pipe.readline())[POINTS_KEY] == [[2, "loss", 0.5]]
        channel.close()
