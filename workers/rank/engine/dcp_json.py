"""Checkpoint metadata and non-tensor values as JSON with explicit types: never unpickled."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)

from workers.rank.engine.errors import EngineFailure

#: the first key of every metadata file we write; a file without it is not ours
FORMAT = "trainboard-dcp-json"
VERSION = 1
#: a data file is one of the checkpoint's own shards, never a path elsewhere
DATA_FILE = re.compile(r"^__\d{1,6}_\d{1,6}\.distcp$")
#: tensor dtypes by their canonical name ("float32", "bfloat16"): a closed table, no lookup by name
DTYPES: dict[str, torch.dtype] = {
    str(v).removeprefix("torch."): v for v in vars(torch).values() if isinstance(v, torch.dtype)
}
_MAX_DIMS = 64


class CheckpointRefused(EngineFailure):
    """A checkpoint that is not a well-formed Trainboard checkpoint: refused, nothing of it run.

    Final: the same checkpoint is refused on every restart, so the job fails at once.
    """

    final = True


def refused(detail: str) -> CheckpointRefused:
    """The error for a refused checkpoint, saying why."""
    return CheckpointRefused(f"checkpoint refused: {detail}")


def _fail(where: str, expected: str) -> CheckpointRefused:
    return refused(f"metadata {where} must be {expected}")


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, "a list")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, "a string")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(where, "a non-negative integer")
    return value


def _ints(value: object, where: str) -> torch.Size:
    items = _list(value, where)
    if len(items) > _MAX_DIMS:
        raise _fail(where, f"at most {_MAX_DIMS} dimensions")
    return torch.Size([_int(v, where) for v in items])


def _keys(value: dict[str, Any], where: str, *names: str) -> None:
    if set(value) != set(names):
        raise _fail(where, f"an object with exactly the keys {', '.join(names)}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise refused("metadata repeats a key")
    return found


def _refuse_constant(name: str) -> None:
    raise refused(f"metadata holds the non-JSON constant {name}")


def parse_json(raw: bytes, what: str) -> Any:
    """Strict JSON (no NaN/Infinity constants, no repeated keys) or CheckpointRefused."""
    if raw[:1] == b"\x80":
        raise refused(f"{what} is a pickle, and a checkpoint with JSON metadata holds none")
    try:
        return json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_no_duplicates,
            parse_constant=_refuse_constant,
        )
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise refused(f"{what} is not JSON ({exc})") from None


def _chunk(value: object, where: str) -> ChunkStorageMetadata:
    item = _dict(value, where)
    _keys(item, where, "offsets", "sizes")
    offsets, sizes = _ints(item["offsets"], where), _ints(item["sizes"], where)
    if len(offsets) != len(sizes):
        raise _fail(where, "a chunk whose offsets and sizes have one length")
    return ChunkStorageMetadata(offsets=offsets, sizes=sizes)


def _entry_to_json(entry: object) -> dict[str, Any]:
    if isinstance(entry, BytesStorageMetadata):
        return {"kind": "bytes"}
    assert isinstance(entry, TensorStorageMetadata), type(entry)
    if entry.properties.layout != torch.strided:
        raise ValueError(f"only strided tensors are checkpointed, not {entry.properties.layout}")
    return {
        "kind": "tensor",
        "dtype": str(entry.properties.dtype).removeprefix("torch."),
        "size": list(entry.size),
        "chunks": [{"offsets": list(c.offsets), "sizes": list(c.sizes)} for c in entry.chunks],
    }


def _entry(value: object, where: str) -> TensorStorageMetadata | BytesStorageMetadata:
    item = _dict(value, where)
    if item.get("kind") == "bytes":
        _keys(item, where, "kind")
        return BytesStorageMetadata()
    if item.get("kind") != "tensor":
        raise _fail(f"{where}.kind", '"tensor" or "bytes"')
    _keys(item, where, "kind", "dtype", "size", "chunks")
    dtype = DTYPES.get(_str(item["dtype"], f"{where}.dtype"))
    if dtype is None:
        raise _fail(f"{where}.dtype", "a torch dtype name")
    size = _ints(item["size"], f"{where}.size")
    chunks = [_chunk(c, f"{where}.chunks") for c in _list(item["chunks"], f"{where}.chunks")]
    if any(len(c.sizes) != len(size) for c in chunks):
        raise _fail(f"{where}.chunks", "chunks with as many dimensions as the tensor")
    return TensorStorageMetadata(TensorProperties(dtype=dtype), size, chunks)


def metadata_to_json(metadata: Metadata) -> bytes:
    """The JSON file for a DCP `Metadata` whose storage data are `_StorageInfo` per index."""
    storage: dict[MetadataIndex, _StorageInfo] = metadata.storage_data
    for index, info in storage.items():
        if info.transform_descriptors or not DATA_FILE.match(info.relative_path):
            raise ValueError(f"unexpected storage for {index.fqn}: {info}")
    meta = metadata.storage_meta or StorageMeta()
    document = {
        "format": FORMAT,
        "version": VERSION,
        "dcp_version": metadata.version,
        "state_dict_metadata": {
            k: _entry_to_json(v) for k, v in metadata.state_dict_metadata.items()
        },
        "planner_data": {k: list(v) for k, v in (metadata.planner_data or {}).items()},
        "storage_data": [
            {
                "fqn": index.fqn,
                "offset": None if index.offset is None else list(index.offset),
                "index": index.index,
                "file": info.relative_path,
                "at": info.offset,
                "length": info.length,
            }
            for index, info in storage.items()
        ],
        "storage_meta": {
            "checkpoint_id": None if meta.checkpoint_id is None else str(meta.checkpoint_id),
            "save_id": meta.save_id,
            "modules": list(meta.modules),
        },
    }
    return json.dumps(document, allow_nan=False, separators=(",", ":")).encode()


def _storage(value: object, where: str) -> tuple[MetadataIndex, _StorageInfo]:
    item = _dict(value, where)
    _keys(item, where, "fqn", "offset", "index", "file", "at", "length")
    offset = None if item["offset"] is None else _ints(item["offset"], f"{where}.offset")
    hint = None if item["index"] is None else _int(item["index"], f"{where}.index")
    name = _str(item["file"], f"{where}.file")
    if not DATA_FILE.match(name):
        raise _fail(f"{where}.file", "a data file of this checkpoint (__<rank>_<n>.distcp)")
    info = _StorageInfo(name, _int(item["at"], f"{where}.at"), _int(item["length"], where))
    return MetadataIndex(_str(item["fqn"], f"{where}.fqn"), offset, hint), info


def _path(value: object, where: str) -> tuple[str | int, ...]:
    parts = _list(value, where)
    if not all(
        isinstance(p, str) or (isinstance(p, int) and not isinstance(p, bool)) for p in parts
    ):
        raise _fail(where, "a list of strings and integers")
    return tuple(parts)


def _optional_str(value: object, where: str) -> str | None:
    return None if value is None else _str(value, where)


def metadata_from_json(raw: bytes) -> Metadata:
    """Parse a metadata file written by `metadata_to_json`; anything else is CheckpointRefused."""
    return metadata_from_document(parse_json(raw, "the checkpoint's .metadata"))


def metadata_from_document(document: object) -> Metadata:
    """The DCP `Metadata` of a parsed metadata document (JSON, or a legacy pickle's plain data)."""
    doc = _dict(document, "the document")
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise refused(f".metadata is not {FORMAT} version {VERSION}")
    _keys(
        doc,
        "the document",
        "format",
        "version",
        "dcp_version",
        "state_dict_metadata",
        "planner_data",
        "storage_data",
        "storage_meta",
    )
    entries = _dict(doc["state_dict_metadata"], "state_dict_metadata")
    planner = _dict(doc["planner_data"], "planner_data")
    meta = _dict(doc["storage_meta"], "storage_meta")
    _keys(meta, "storage_meta", "checkpoint_id", "save_id", "modules")
    modules = _list(meta["modules"], "storage_meta.modules")
    return Metadata(
        state_dict_metadata={k: _entry(v, f"entry {k!r}") for k, v in entries.items()},
        planner_data={k: _path(v, f"planner_data {k!r}") for k, v in planner.items()},
        storage_data=dict(
            _storage(s, "storage_data") for s in _list(doc["storage_data"], "storage_data")
        ),
        storage_meta=StorageMeta(
            checkpoint_id=_optional_str(meta["checkpoint_id"], "storage_meta.checkpoint_id"),
            save_id=_optional_str(meta["save_id"], "storage_meta.save_id"),
            modules=[_str(m, "storage_meta.modules") for m in modules],
        ),
        version=_optional_str(doc["dcp_version"], "dcp_version"),
    )


def value_to_json(value: object) -> bytes:
    """A non-tensor state value (hyperparameter, flag) as tagged JSON; other types are refused."""
    return json.dumps(_tag(value), allow_nan=False, separators=(",", ":")).encode()


def _tag(value: object) -> object:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, list):
        return [_tag(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_tag(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _tag(v) for k, v in value.items()}}
    raise TypeError(f"a {type(value).__name__} cannot be checkpointed as JSON: {value!r}")


def value_from_json(raw: bytes, fqn: str) -> object:
    """Parse a value written by `value_to_json`, or CheckpointRefused."""
    return _untag(parse_json(raw, f"the value of {fqn}"), fqn)


def _untag(value: object, fqn: str) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_untag(v, fqn) for v in value]
    tagged = _dict(value, f"value of {fqn}")
    if set(tagged) == {"tuple"}:
        return tuple(_untag(v, fqn) for v in _list(tagged["tuple"], f"value of {fqn}"))
    if set(tagged) == {"dict"}:
        return {k: _untag(v, fqn) for k, v in _dict(tagged["dict"], f"value of {fqn}").items()}
    if set(tagged) == {"float"} and tagged["float"] in ("nan", "inf", "-inf"):
        return float(tagged["float"])
    raise _fail(f"value of {fqn}", "JSON written by Trainboard")
