"""The memory estimate against the cluster's devices: which would hold the job."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from backend.nodes.models import Node
from workers.contract.memory_estimate import estimate
from workers.contract.spec import JobSpec


def _gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


def memory_fit(session: Session, *, spec: JobSpec) -> dict[str, Any]:
    """The estimate per device and, for each device of every node, whether it fits.

    A GPU holds one rank; a node's CPU slots share its RAM, so a CPU slot fits when the
    job's ranks on that node together fit (ValueError for a script job).
    """
    on_gpu, on_cpu = estimate(spec, gpu=True), estimate(spec, gpu=False)
    nodes = session.scalars(
        select(Node).where(Node.state != "lost").options(selectinload(Node.devices))
    ).all()
    per_node = spec.parallelism.devices // spec.parallelism.nodes
    devices, warnings = [], []
    for node in nodes:
        slots = [d for d in node.devices if d.kind == "cpu"]
        for device in node.devices:
            cpu = device.kind == "cpu"
            ranks = min(per_node, len(slots)) if cpu else 1
            need = int(on_cpu.total if cpu else on_gpu.total) * ranks
            # one node's slots hold every rank, the dedicated server among them, which trains
            # no batch (on several nodes, a node of workers only is the one to fit)
            server = on_cpu.server if cpu and spec.parallelism.nodes == 1 else None
            if server is not None:
                need += server - on_cpu.total
            fits = None if device.memory_total is None else need <= device.memory_total
            note = (
                f"{_gib(need)} for {ranks} ranks"
                + (" (one a dedicated server)" if server is not None else "")
                + " in the host's RAM"
                if cpu
                else f"{_gib(need)} of {_gib(device.memory_total or 0)}"
            )
            devices.append(
                {
                    "node": node.name,
                    "index": device.index,
                    "kind": device.kind,
                    "name": device.name,
                    "memory_total": device.memory_total,
                    "memory_shared": cpu,
                    "ranks": ranks,
                    "need": need,
                    "fits": fits,
                    "note": note,
                }
            )
    if devices and not any(d["fits"] for d in devices):
        warnings.append(
            f"it will not fit: about {_gib(on_gpu.total)} per GPU ({_gib(on_cpu.total)} per CPU "
            "rank) and no device has that much memory; lower batch_size, raise grad_accum, "
            "use bf16 or more pipeline stages"
        )
    elif any(d["fits"] is False for d in devices):
        warnings.append("some devices are too small for it: see the devices marked no")
    return {**on_gpu.as_dict(), "devices": devices, "warnings": warnings}
