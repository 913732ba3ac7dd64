"""Which nodes share this node's run root, checked rather than assumed.

At every registration a node writes `<data_dir>/runs/.nodes/<name>` holding its worker's
instance id (new at every start) and reports the markers of the others it can read. The
control plane groups nodes whose current instances see each other: a multi-node job is
placed only inside one group, so every rank's checkpoint shard lands where all can read it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from workers.contract.run_layout import storage_marker_dir

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_INSTANCE = re.compile(r"^[0-9a-f]{32}$")


def write_marker(data_dir: Path, name: str, instance: str) -> None:
    """Leave this node's marker (atomically: a reader never sees half of it)."""
    markers = storage_marker_dir(data_dir)
    markers.mkdir(mode=0o700, parents=True, exist_ok=True)  # the service user's alone
    partial = markers / f".{name}.{instance}.tmp"
    partial.write_text(instance)
    os.replace(partial, markers / name)


def markers_seen(data_dir: Path, own: str) -> dict[str, str]:
    """The other nodes' markers in this run root: {node name: instance}."""
    seen: dict[str, str] = {}
    markers = storage_marker_dir(data_dir)
    if not markers.is_dir():
        return seen
    for entry in markers.iterdir():
        if entry.name == own or not _NAME.match(entry.name) or not entry.is_file():
            continue
        try:
            instance = entry.read_text()[:64].strip()
        except OSError:
            continue
        if _INSTANCE.match(instance):
            seen[entry.name] = instance
    return seen
