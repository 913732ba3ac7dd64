"""`trainboard usage` and `trainboard limits` against the API in-process."""

from __future__ import annotations

from typing import Any

from tests.backend.test_usage_api import two_attempts  # noqa: F401 (fixture)
from tests.security.test_cli_admin import run  # noqa: F401 (fixture)


def test_usage_prints_device_hours_allocated_busy_and_their_ratio(
    run: Any,  # noqa: F811
    tokens: dict[str, str],
    two_attempts: tuple[int, int],  # noqa: F811
) -> None:
    window = ("--from", "2026-01-01", "--to", "2026-01-03")
    printed = run(tokens["admin"], "usage", *window)
    assert printed.exit_code == 0, printed.output
    lines = [line.split() for line in printed.output.splitlines()]
    assert lines[0][:5] == ["usage", "from", "2026-01-01T00:00:00Z", "to", "2026-01-03T00:00:00Z"]
    assert ["alice", "2.00", "1.25", "62", "1"] in lines  # 2 devices x 1 h, 50 % and 75 %
    assert ["admin", "1.00", "0.00", "0", "1"] in lines
    assert ["total", "3.00", "1.25", "42", "2"] in lines
    mine = run(tokens["alice"], "usage", "--by", "node", *window)
    assert [line.split()[0] for line in mine.output.splitlines()[2:]] == ["n1", "total"]
    refused = run(tokens["admin"], "usage", "--by", "team")
    assert refused.exit_code == 2 and "--by must be user, job or node" in refused.output


def test_limits_sets_shares_and_quotas_and_lists_them(
    run: Any,  # noqa: F811
    tokens: dict[str, str],
) -> None:
    changed = run(tokens["admin"], "limits", "alice", "--share", "2", "--max-devices", "8")
    assert changed.exit_code == 0, changed.output
    assert changed.output.splitlines()[1].split() == ["alice", "2", "8", "-", "0", "0.00"]
    lifted = run(tokens["admin"], "limits", "alice", "--max-devices", "-1")
    assert lifted.output.splitlines()[1].split()[:4] == ["alice", "2", "-", "-"]
    listed = run(tokens["admin"], "limits")
    assert {line.split()[0] for line in listed.output.splitlines()[1:]} == {"admin", "alice"}
    refused = run(tokens["alice"], "limits", "alice", "--share", "5")
    assert refused.exit_code == 2 and "admin" in refused.output
