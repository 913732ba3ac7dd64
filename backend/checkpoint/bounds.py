"""A checkpoint's JSON metadata checked against what it describes, before anything is
allocated from it (no torch import: this runs first in the consolidation child).

The metadata comes from the job's ranks. Every number in it becomes a size somewhere: a
tensor's shape is allocated whole, a list index in `planner_data` grows a Python list to that
length one element at a time (one index of 10**9 costs a minute of CPU and gigabytes), a
storage offset and length are read from a shard. So: every tensor's element count, and every
chunk's, is at most the bytes the shards hold (no dtype is smaller than a byte), every chunk
lies inside its tensor, every storage item inside its file and every list index below the
number of entries. The strict parser (workers/rank/engine/dcp_json.py) checks the rest.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from workers.contract.checkpoints import METADATA_FILE

#: no metadata a download reads is larger (a GPT-3-sized checkpoint's is a few MiB)
MAX_METADATA_BYTES = 64 << 20
MAX_DIMS = 64
MAX_PATH_DEPTH = 64


class MetadataRefused(ValueError):
    """Metadata that describes more than the checkpoint holds, or is not shaped as ours."""


def check_checkpoint(step_dir: Path) -> None:
    """Check the metadata of the checkpoint copied into step_dir (regular files only there)."""
    files = {e.name: e.stat().st_size for e in os.scandir(step_dir) if e.is_file()}
    size = files.get(METADATA_FILE)
    if size is None:
        raise MetadataRefused("it has no .metadata")
    if size > MAX_METADATA_BYTES:
        raise MetadataRefused(f".metadata is larger than {MAX_METADATA_BYTES >> 20} MiB")
    raw = (step_dir / METADATA_FILE).read_bytes()
    if raw[:1] == b"\x80":
        raise MetadataRefused(".metadata is a pickle, and pickles are never loaded")
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise MetadataRefused(f".metadata is not JSON ({str(err)[:200]})") from None
    data = {name: n for name, n in files.items() if name != METADATA_FILE}
    check_metadata(document, file_sizes=data)


def check_metadata(document: object, *, file_sizes: dict[str, int]) -> None:
    """Refuse metadata whose sizes, offsets or indices exceed what the files can hold."""
    doc = _dict(document, "the document")
    entries = _dict(doc.get("state_dict_metadata"), "state_dict_metadata")
    budget = sum(file_sizes.values())
    shapes: dict[str, tuple[list[int], list[list[int]]]] = {}
    for fqn, value in entries.items():
        entry = _dict(value, f"entry {fqn!r}")
        if entry.get("kind") != "tensor":
            continue
        size = _ints(entry.get("size"), f"{fqn}.size")
        if _numel(size) > budget:
            raise MetadataRefused(
                f"{fqn} is a tensor of {_numel(size)} elements; the shards hold {budget} bytes"
            )
        offsets = []
        for chunk in _list(entry.get("chunks"), f"{fqn}.chunks"):
            offsets.append(_chunk(_dict(chunk, f"{fqn}.chunks"), size, fqn, budget))
        shapes[fqn] = (size, offsets)
    for item in _list(doc.get("storage_data"), "storage_data"):
        _storage(_dict(item, "storage_data"), shapes, file_sizes)
    planner = _dict(doc.get("planner_data"), "planner_data")
    for key, path in planner.items():
        _planner_path(path, key, len(entries))


def _chunk(chunk: dict[str, Any], size: list[int], fqn: str, budget: int) -> list[int]:
    offsets = _ints(chunk.get("offsets"), f"{fqn} chunk offsets")
    sizes = _ints(chunk.get("sizes"), f"{fqn} chunk sizes")
    if len(offsets) != len(size) or len(sizes) != len(size):
        raise MetadataRefused(f"a chunk of {fqn} has not the tensor's {len(size)} dimensions")
    if any(o + n > dim for o, n, dim in zip(offsets, sizes, size, strict=True)):
        raise MetadataRefused(f"a chunk of {fqn} lies outside its shape {size}")
    if _numel(sizes) > budget:
        raise MetadataRefused(f"a chunk of {fqn} has more elements than the shards hold bytes")
    return offsets


def _storage(
    item: dict[str, Any],
    shapes: dict[str, tuple[list[int], list[list[int]]]],
    file_sizes: dict[str, int],
) -> None:
    fqn, name = item.get("fqn"), item.get("file")
    at = _int(item.get("at"), f"storage of {fqn} at")
    length = _int(item.get("length"), f"storage of {fqn} length")
    if not isinstance(name, str) or name not in file_sizes:
        raise MetadataRefused(f"the storage of {fqn} names a file the checkpoint does not hold")
    if at + length > file_sizes[name]:
        raise MetadataRefused(f"the storage of {fqn} lies past the end of {name}")
    if not isinstance(fqn, str):
        raise MetadataRefused("a storage item's fqn must be a string")
    offset, hint = item.get("offset"), item.get("index")
    if fqn in shapes:
        size, chunks = shapes[fqn]
        if offset is not None and _ints(offset, f"storage of {fqn} offset") not in chunks:
            raise MetadataRefused(f"the storage of {fqn} is at an offset none of its chunks has")
        if hint is not None and _int(hint, f"storage of {fqn} index") >= max(len(chunks), 1):
            raise MetadataRefused(f"the storage of {fqn} names chunk {hint} of {len(chunks)}")
    elif hint is not None and _int(hint, f"storage of {fqn} index") > 0:
        raise MetadataRefused(f"the storage of {fqn} names a chunk of a value that has none")


def _planner_path(value: object, key: str, entries: int) -> None:
    path = _list(value, f"planner_data {key!r}")
    if len(path) > MAX_PATH_DEPTH:
        raise MetadataRefused(f"planner_data {key!r} is deeper than {MAX_PATH_DEPTH}")
    for part in path:
        if isinstance(part, bool) or not isinstance(part, (int, str)):
            raise MetadataRefused(f"planner_data {key!r} holds a {type(part).__name__}")
        if isinstance(part, int) and not 0 <= part < entries:
            raise MetadataRefused(
                f"planner_data {key!r} has list index {part}, not below its {entries} entries"
            )


def _numel(size: list[int]) -> int:
    return math.prod(size)


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MetadataRefused(f"{where} must be an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise MetadataRefused(f"{where} must be a list")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MetadataRefused(f"{where} must be a non-negative integer")
    return value


def _ints(value: object, where: str) -> list[int]:
    items = _list(value, where)
    if len(items) > MAX_DIMS:
        raise MetadataRefused(f"{where} has more than {MAX_DIMS} dimensions")
    return [_int(v, where) for v in items]
