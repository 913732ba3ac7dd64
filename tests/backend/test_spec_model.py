"""`Job.spec_model`: the stored spec as a JobSpec, with the contract's defaults, cached."""

from __future__ import annotations

from backend.jobs.models import Job
from workers.contract.spec import JobSpec

STORED = {"name": "j", "template": "mlp", "parallelism": {"devices": 2}}


def test_a_field_the_row_lacks_has_the_contracts_default() -> None:
    job = Job(id=1, name="j", owner_id=1, spec=dict(STORED), devices_requested=2)
    spec = job.spec_model
    assert isinstance(spec, JobSpec)
    assert spec.max_restarts == JobSpec.model_fields["max_restarts"].default == 2
    assert (spec.parallelism.devices, spec.parallelism.nodes, spec.preemptible) == (2, 1, True)


def test_it_is_validated_once_until_the_spec_is_replaced() -> None:
    job = Job(id=2, name="j", owner_id=1, spec=dict(STORED), devices_requested=2)
    first = job.spec_model
    assert job.spec_model is first
    job.spec = {**job.spec, "tags": ["a"]}
    assert job.spec_model.tags == ["a"]
    again = Job(id=2, name="j", owner_id=1, spec={**STORED, "tags": ["a"]}, devices_requested=2)
    assert again.spec_model is job.spec_model  # another session's row, an equal stored value


def test_a_reused_id_with_another_spec_is_validated_afresh() -> None:
    one = Job(id=3, name="j", owner_id=1, spec=dict(STORED), devices_requested=2)
    other = Job(id=3, name="j", owner_id=1, spec={**STORED, "max_restarts": 5}, devices_requested=2)
    assert (one.spec_model.max_restarts, other.spec_model.max_restarts) == (2, 5)
