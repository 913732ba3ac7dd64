"""Run health on a real stack: a user script that hangs in a collective, with a straggler rank."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.health.receiver import RECEIVER_ENV, Receiver
from tests.health.scripts import hanging_script
from tests.stack import RunningStack, trainboard_up, wait_for

pytestmark = pytest.mark.slow

HANG_TIMEOUT = 5


@pytest.fixture(scope="module")
def scripted_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """`trainboard up` whose worker runs user scripts from its own `scripts/` root."""
    tmp = tmp_path_factory.mktemp("health")
    scripts = tmp / "scripts"
    scripts.mkdir()
    (scripts / "hang.py").write_text(hanging_script(block_at=30))
    scripts.chmod(0o755)
    (scripts / "hang.py").chmod(0o644)
    with trainboard_up(
        tmp, extra_env={"TRAINBOARD_SCRIPT_ROOTS": str(scripts), **RECEIVER_ENV}
    ) as stack:
        yield stack


def _events(stack: RunningStack, job_id: int, kind: str) -> list[dict[str, Any]]:
    with stack.client() as client:
        events = client.get(f"/api/jobs/{job_id}/events").json()
    return [e for e in events if e["kind"] == kind]


def _unix(stamp: str) -> float:
    moment = datetime.fromisoformat(stamp)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def test_a_rank_stuck_in_a_collective_is_flagged_hung_with_readable_stacks_and_a_straggler(
    scripted_stack: RunningStack,
) -> None:
    stack = scripted_stack
    receiver = Receiver()
    receiver.start()
    with stack.client() as client:
        events = ["hung", "straggler"]
        hook = client.post("/api/webhooks", json={"url": receiver.url, "events": events})
        assert hook.status_code == 201, hook.text
    spec = {
        "name": "hangs",
        "entrypoint": {"script": "hang.py"},
        "parallelism": {"devices": 2},
        "health": {"hang_timeout_s": HANG_TIMEOUT},
    }
    with stack.client() as client:
        job_id = client.post("/api/jobs", json=spec).json()["id"]

    [straggler] = wait_for(
        lambda: _events(stack, job_id, "straggler"), timeout=120, what="a straggler event"
    )
    assert straggler["message"].startswith("rank 1 on node local device ")
    [hung] = wait_for(lambda: _events(stack, job_id, "hung"), timeout=120, what="a hung event")

    assert "rank 0 at step 30 in phase collective" in hung["message"]
    assert "rank 1 at step 30 in phase collective" in hung["message"]
    with stack.client() as client:
        last = max(
            max(
                client.get(f"/api/jobs/{job_id}/metrics/step_time", params={"rank": r}).json()[
                    "time"
                ]
            )
            for r in (0, 1)
        )
    assert _unix(hung["time"]) - last <= HANG_TIMEOUT + 5  # flagged within the bound

    def stacks() -> str:
        with stack.client() as client:
            lines = client.get(f"/api/jobs/{job_id}/logs", params={"limit": 1000}).json()["lines"]
        text = "\n".join(line["line"] for line in lines if line["stream"] == "stderr")
        return text if "(most recent call first)" in text else ""

    dump = wait_for(stacks, timeout=30, what="the ranks' stacks in the job's logs")
    assert "hang.py" in dump and "barrier" in dump  # rank 0 waits in the collective

    def saved_stacks() -> list[dict[str, Any]]:
        with stack.client() as client:
            found: list[dict[str, Any]] = client.get(f"/api/jobs/{job_id}/hang-stacks").json()
        return found if len(found) == 2 else []

    saved = wait_for(saved_stacks, timeout=30, what="each rank's stack at the hang, via the API")
    assert [s["rank"] for s in saved] == [0, 1] and {s["step"] for s in saved} == {30}
    assert all("Thread 0x" in s["stack"] and 'File "' in s["stack"] for s in saved)
    assert "barrier" in saved[0]["stack"]  # rank 0's stack: waiting in the collective
    files = sorted(stack.data_dir.glob(f"**/logs/job-{job_id}/attempt-1/hang-stacks/rank-*.txt"))
    assert [f.name for f in files] == ["rank-0.txt", "rank-1.txt"]
    assert "barrier" in files[0].read_text()
    wait_for(lambda: len(receiver.received) >= 2, timeout=30, what="the two webhooks")
    posts = {p["headers"]["X-Trainboard-Event"]: p["body"] for p in receiver.received}
    assert set(posts) == {"straggler", "hung"} and len(receiver.received) == 2
    assert b"rank 1 at step 30" in posts["hung"] and b"is a straggler" in posts["straggler"]
    receiver.server.shutdown()
    with stack.client() as client:
        assert client.get(f"/api/jobs/{job_id}").json()["state"] == "running"  # notify only
        client.post(f"/api/jobs/{job_id}/cancel")
        wait_for(
            lambda: client.get(f"/api/jobs/{job_id}").json()["state"] == "cancelled",
            timeout=60,
            what="the hung job to be cancelled",
        )
