"""The placement policy as a pure function: gang, packing, priority and no starvation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.placement.policy import NodeCapacity, QueuedJob, plan, queue_order


def _node(name: str, total: int, busy: set[int] | None = None) -> NodeCapacity:
    return NodeCapacity(name, total, tuple(i for i in range(total) if i not in (busy or set())))


def test_gang_is_all_or_nothing_and_packs_the_fullest_node_that_fits() -> None:
    nodes = [_node("a", 4, {0, 1}), _node("b", 4)]
    result = plan([QueuedJob(1, devices=2)], nodes)
    assert result.placements[0].slices == (("a", (2, 3)),)
    result = plan([QueuedJob(1, devices=3)], nodes)
    assert result.placements[0].slices == (("b", (0, 1, 2)),)
    result = plan([QueuedJob(1, devices=5)], nodes)
    assert result.placements == [] and "no cluster capacity" in result.waiting[1]


def test_multi_node_job_gets_the_same_count_on_each_node() -> None:
    nodes = [_node("a", 2), _node("b", 2), _node("c", 2, {0})]
    (placement,) = plan([QueuedJob(1, devices=4, nodes=2)], nodes).placements
    assert sorted(placement.slices) == [("a", (0, 1)), ("b", (0, 1))]


def test_high_priority_goes_first_and_a_blocked_head_reserves_its_node() -> None:
    nodes = [_node("a", 2, {0}), _node("b", 1), _node("c", 2, {0})]
    queue = [
        QueuedJob(1, devices=2, priority=1, order=1),
        QueuedJob(2, devices=1, priority=0, order=2),
        QueuedJob(3, devices=1, priority=2, order=3),
        QueuedJob(4, devices=1, priority=2, order=4),
    ]
    result = plan(queue, nodes)
    placed = {p.job_id: p.slices for p in result.placements}
    assert placed[2] == (("a", (1,)),)  # high priority first, packed onto the fuller node
    assert result.waiting[1] == "waiting for 2 free devices"  # reserves c, where it fits first
    assert placed[3] == (("b", (0,)),)  # backfill on a node the head can never use
    assert result.waiting[4] == "waiting for 1 free device"  # c's free device is the head's


def test_a_wide_job_is_not_starved_by_a_stream_of_narrow_ones() -> None:
    """Each round narrow jobs finish and new ones arrive; the 2-device job still starts."""
    running: dict[int, tuple[str, tuple[int, ...]]] = {1: ("a", (0,))}
    queue = [QueuedJob(100, devices=2, order=0)]
    next_id = 2
    for _round in range(5):
        queue += [QueuedJob(next_id + k, devices=1, order=next_id + k) for k in range(3)]
        next_id += 3
        busy = {i for node, devs in running.values() if node == "a" for i in devs}
        result = plan(queue, [_node("a", 2, busy)])
        if any(p.job_id == 100 for p in result.placements):
            return
        placed = {p.job_id: p.slices[0] for p in result.placements}
        running = placed  # everything running now finishes before the next round
        queue = [job for job in queue if job.id not in placed]
    raise AssertionError("the 2-device job never started")


jobs = st.lists(
    st.builds(
        QueuedJob,
        id=st.integers(1, 10_000),
        devices=st.integers(1, 8),
        nodes=st.sampled_from([1, 1, 1, 2]),
        priority=st.integers(0, 2),
        order=st.integers(0, 1000),
    ),
    max_size=25,
    unique_by=lambda j: j.id,
).map(
    lambda js: [
        j if j.devices % j.nodes == 0 else QueuedJob(j.id, j.nodes, j.nodes, j.priority, j.order)
        for j in js
    ]
)
clusters = st.lists(
    st.tuples(st.integers(1, 8), st.sets(st.integers(0, 7))), min_size=1, max_size=6
).map(
    lambda specs: [
        _node(f"n{i}", total, {b for b in busy if b < total})
        for i, (total, busy) in enumerate(specs)
    ]
)


@settings(max_examples=300, deadline=None)
@given(queue=jobs, nodes=clusters)
def test_placements_never_double_book_and_always_hold_the_gang(
    queue: list[QueuedJob], nodes: list[NodeCapacity]
) -> None:
    result = plan(queue, nodes)
    free = {n.name: set(n.free) for n in nodes}
    used: set[tuple[str, int]] = set()
    by_id = {j.id: j for j in queue}
    for placement in result.placements:
        job = by_id[placement.job_id]
        assert len(placement.slices) == job.nodes
        assert len({name for name, _ in placement.slices}) == job.nodes
        for name, devices in placement.slices:
            assert len(devices) == job.per_node and set(devices) <= free[name]
            for device in devices:
                assert (name, device) not in used, "a device was booked twice"
                used.add((name, device))
    assert {p.job_id for p in result.placements}.isdisjoint(result.waiting)
    assert {p.job_id for p in result.placements} | set(result.waiting) == set(by_id)


@settings(max_examples=300, deadline=None)
@given(queue=jobs, nodes=clusters)
def test_a_jobs_fate_depends_only_on_the_jobs_ahead_of_it(
    queue: list[QueuedJob], nodes: list[NodeCapacity]
) -> None:
    """Priority and order are respected: later jobs never take what an earlier one could use."""
    ordered = queue_order(queue)
    full = plan(queue, nodes)
    placed = {p.job_id: p for p in full.placements}
    for index, job in enumerate(ordered):
        alone = plan(ordered[: index + 1], nodes)
        mine = [p for p in alone.placements if p.job_id == job.id]
        assert (job.id in placed) == bool(mine)
        if mine:
            assert mine[0] == placed[job.id]
