"""The policy on a shared cluster: fair share, quotas and preemption (pure function)."""

from __future__ import annotations

from backend.placement.fairshare import fair_share_factors
from backend.placement.policy import NodeCapacity, QueuedJob, Quota, plan, queue_order
from backend.placement.preemption import Preemption, RunningJob


def _node(name: str, total: int, busy: set[int] | None = None) -> NodeCapacity:
    return NodeCapacity(name, total, tuple(i for i in range(total) if i not in (busy or set())))


def test_fair_share_factor_follows_slurm_2_to_the_minus_usage_over_share() -> None:
    factors = fair_share_factors(usage={1: 360_000.0, 2: 0.0}, shares={1: 1.0, 2: 1.0})
    assert factors[2] == 1.0  # used nothing
    assert factors[1] == 2 ** (-1.0 / 0.5)  # all of the usage on half of the shares
    doubled = fair_share_factors(usage={1: 360_000.0, 2: 0.0}, shares={1: 2.0, 2: 1.0})
    assert doubled[1] > factors[1]  # a larger share forgives the same usage more
    assert fair_share_factors(usage={}, shares={}) == {}


def test_the_user_who_ran_yesterday_waits_behind_the_one_who_ran_nothing() -> None:
    factors = fair_share_factors(usage={1: 100 * 3600.0, 2: 0.0}, shares={1: 1.0, 2: 1.0})
    heavy = QueuedJob(1, devices=1, order=1, owner=1, fair_share=factors[1])
    light = QueuedJob(2, devices=1, order=2, owner=2, fair_share=factors[2])
    urgent = QueuedJob(3, devices=1, priority=0, order=3, owner=1, fair_share=factors[1])
    assert [j.id for j in queue_order([heavy, light, urgent])] == [3, 2, 1]
    result = plan([heavy, light], [_node("a", 1)])
    assert [p.job_id for p in result.placements] == [2]  # the later submission goes first
    assert result.waiting[1] == "waiting for 1 free device"


def test_a_job_over_the_device_quota_waits_with_that_reason_and_blocks_nobody() -> None:
    quotas = {1: Quota(max_devices=4, devices_in_use=2)}
    queue = [
        QueuedJob(1, devices=2, order=1, owner=1),  # 2 + 2 = 4: allowed
        QueuedJob(2, devices=1, order=2, owner=1),  # 5 > 4: over quota
        QueuedJob(3, devices=4, order=3, owner=2),  # another user, no quota
    ]
    result = plan(queue, [_node("a", 8)], quotas=quotas)
    assert sorted(p.job_id for p in result.placements) == [1, 3]
    assert result.waiting[2] == "over quota: 4 of 4 devices in use; this job needs 1"


def test_a_job_over_the_device_hour_quota_waits() -> None:
    quotas = {1: Quota(max_device_hours=100, device_hours=100.5)}
    result = plan([QueuedJob(1, devices=1, owner=1)], [_node("a", 1)], quotas=quotas)
    assert result.placements == []
    assert result.waiting[1] == "over quota: 100.5 of 100 device-hours used in the last 7 days"


def _low(job_id: int, node: str, devices: int, started: float, **kw: bool) -> RunningJob:
    return RunningJob(job_id, priority=2, slices=((node, devices),), started=started, **kw)


def test_a_high_priority_job_preempts_the_lowest_priority_youngest_victims_it_needs() -> None:
    running = [
        _low(1, "a", 2, started=10.0),
        _low(2, "a", 2, started=20.0),  # younger: preempted first
        RunningJob(3, priority=1, slices=(("b", 4),), started=30.0),  # normal priority
    ]
    nodes = [_node("a", 4, {0, 1, 2, 3}), _node("b", 4, {0, 1, 2, 3})]
    result = plan([QueuedJob(9, devices=2, priority=0)], nodes, running=running)
    assert result.preemptions == [Preemption(victim=2, by=9)]  # one victim is enough
    assert result.waiting[9].startswith("preempting lower-priority job 2 for 2 devices")
    wide = plan([QueuedJob(9, devices=4, priority=0)], nodes, running=running)
    assert sorted(p.victim for p in wide.preemptions) == [1, 2]  # 2 low jobs, not the normal one


def test_never_a_non_preemptible_recent_or_equal_priority_victim() -> None:
    nodes = [_node("a", 2, {0, 1})]
    for victim in (
        _low(1, "a", 2, started=1.0, preemptible=False),
        RunningJob(1, priority=0, slices=(("a", 2),)),
    ):
        result = plan([QueuedJob(9, devices=2, priority=0)], nodes, running=[victim])
        assert result.preemptions == []
        assert result.waiting[9] == "waiting for 2 free devices"


def test_devices_of_stopping_victims_are_waited_for_not_preempted_again() -> None:
    nodes = [_node("a", 4, {2, 3})]  # the first victim is gone, the second still stopping
    running = [_low(2, "a", 2, started=2.0, stopping=True), _low(3, "b", 1, started=3.0)]
    queue = [QueuedJob(9, devices=4, priority=0), QueuedJob(1, devices=2, priority=2)]
    result = plan(queue, nodes, running=running)
    assert result.preemptions == []
    assert result.waiting[9] == "waiting for 4 free devices"
    assert result.waiting[1] == "waiting behind jobs of higher priority or earlier submission"


def test_a_victim_spared_when_a_later_one_alone_frees_enough() -> None:
    # the youngest frees 1 device (not enough); the next frees 3: the first is spared
    running = [_low(1, "a", 3, started=1.0), _low(2, "a", 1, started=2.0)]
    result = plan(
        [QueuedJob(9, devices=3, priority=1)], [_node("a", 4, {0, 1, 2, 3})], running=running
    )
    assert result.preemptions == [Preemption(victim=1, by=9)]
