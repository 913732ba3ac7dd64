"""`StopRequest` is an enum (workers/contract/protocol.py): stored and sent as the same strings
as before, read back as the enum, and never spelled as a bare string in the backend."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
import redis
from sqlalchemy import select, text

from backend.auth.models import User
from backend.db import Database
from backend.jobs.models import Job
from tests.source_rules import violations
from tests.workers.worker_helpers import attempt_order
from workers.contract.keys import Keys
from workers.contract.protocol import StopRequest
from workers.contract.spec import JobSpec
from workers.supervisor.attempt_streams import ControlKey

BACKEND = Path(__file__).resolve().parents[2] / "backend"


def bare_stop_strings(source: str) -> list[int]:
    """Lines that compare or assign `stop_request`, or pass `action=`, as a string literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            about = any(isinstance(s, ast.Attribute) and s.attr == "stop_request" for s in sides)
            literal = any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides)
            if about and literal:
                found.append(node.lineno)
        elif isinstance(node, ast.Assign):
            named = any(
                isinstance(t, ast.Attribute) and t.attr == "stop_request" for t in node.targets
            )
            if named and isinstance(node.value, ast.Constant) and node.value.value is not None:
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
            "request_stop",
            "request_stops",
        ):
            for kw in node.keywords:
                if kw.arg == "action" and isinstance(kw.value, ast.Constant):
                    found.append(node.lineno)
    return sorted(found)


def test_the_values_are_the_strings_stored_and_polled_before() -> None:
    assert [r.value for r in StopRequest] == ["cancel", "pause", "preempt"]


def test_no_backend_code_spells_a_stop_request_as_a_string() -> None:
    bad = violations(BACKEND.rglob("*.py"), bare_stop_strings)
    assert bad == [], "use workers.contract.protocol.StopRequest"


def test_the_checker_sees_a_bare_string() -> None:
    sample = (
        'if job.stop_request == "cancel": pass\n'
        'job.stop_request = "pause"\n'
        'request_stop(client, attempt_id=1, action="cancel")\n'
        "job.stop_request = None\n"
        "if job.stop_request == StopRequest.cancel: pass\n"
    )
    assert bare_stop_strings(sample) == [1, 2, 3]


@pytest.fixture
def stored(database: Database) -> Database:
    """The API's migrated SQLite database, with one job."""
    with database.session() as session:
        user = User(username="stopper", role="user")
        session.add(user)
        session.flush()
        session.add(Job(name="j", owner_id=user.id, spec={}, devices_requested=1))
    return database


def test_the_column_keeps_its_strings_and_reads_back_the_enum(stored: Database) -> None:
    with stored.session() as session:
        job = session.scalars(select(Job)).one()
        job.stop_request = StopRequest.pause
    with stored.session() as session:
        raw = session.execute(text("SELECT stop_request FROM jobs")).scalar_one()
        assert type(raw) is str and raw == "pause"  # no migration: the same strings
        session.execute(text("UPDATE jobs SET stop_request = 'preempt'"))
    with stored.session() as session:
        job = session.scalars(select(Job)).one()
        assert job.stop_request is StopRequest.preempt
        assert session.scalars(select(Job.id).where(Job.stop_request == "preempt")).all()


def test_the_supervisor_reads_each_request_of_the_enum_and_nothing_else(redis_url: str) -> None:
    order = attempt_order(JobSpec.model_validate({"name": "t", "template": "mlp"}))
    key = ControlKey(order, redis_url, shutdown=threading.Event())
    client = redis.Redis.from_url(redis_url)
    control = Keys(order.deployment).control(order.attempt_id)
    try:
        assert key.request() is None
        for request in StopRequest:
            client.set(control, request.value)
            assert key.request() == request
        client.set(control, "reboot")  # not a request: ignored
        assert key.request() is None
    finally:
        key.close()
