"""What a node tells the control plane about itself when it registers."""

from __future__ import annotations

import logging
import socket
import sys

from workers.contract.protocol import NodeDevice, NodeRegistration
from workers.node.address import advertised, api_host
from workers.node.settings import WorkerSettings
from workers.node.storage import markers_seen, write_marker

log = logging.getLogger(__name__)


def node_registration(
    settings: WorkerSettings, *, instance: str, devices: list[NodeDevice]
) -> NodeRegistration:
    """Derive the advertised address, leave this node's storage marker, and say what it sees."""
    where = advertised(
        api_url=settings.api_url, address=settings.address, interface=settings.interface
    )
    line = (
        f"node {settings.node_name} advertises {where.address} on interface "
        f"{where.interface or '(unknown)'} ({where.how})"
    )
    log.info("%s", line)
    print(f"trainboard worker: {line}", file=sys.stderr, flush=True)
    data_dir = settings.data_dir.resolve()
    write_marker(data_dir, settings.node_name, instance)
    return NodeRegistration(
        name=settings.node_name,
        instance=instance,
        hostname=socket.gethostname(),
        address=where.address,
        interface=where.interface,
        api_host=api_host(settings.api_url),
        storage_seen=markers_seen(data_dir, settings.node_name),
        devices=devices,
        data_dir=str(data_dir),
    )
