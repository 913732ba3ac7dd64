"""DCP storage without pickle: raw tensor bytes and JSON values in the shards, JSON metadata."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torch.distributed.checkpoint.filesystem import CURRENT_DCP_VERSION, _StorageInfo
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, TensorStorageMetadata
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    WriteItem,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from workers.contract.checkpoints import METADATA_FILE
from workers.rank.engine.dcp_json import (
    CheckpointRefused,
    metadata_from_json,
    metadata_to_json,
    refused,
    value_from_json,
    value_to_json,
)
from workers.rank.engine.legacy_dcp import metadata_from_pickle, read_archive

#: no checkpoint's metadata is larger than this (a GPT-3-sized one is a few MiB)
MAX_METADATA_BYTES = 256 << 20


def _raw(tensor: torch.Tensor) -> memoryview:
    """A tensor's elements as bytes, C order, native byte order (the reader's `_from_raw`)."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().data


def _from_raw(buffer: bytearray, dtype: torch.dtype, sizes: torch.Size) -> torch.Tensor:
    if len(buffer) == 0:
        return torch.empty(sizes, dtype=dtype)
    return torch.frombuffer(buffer, dtype=torch.uint8).view(dtype).reshape(sizes)


def _fsync_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


class JsonSavePlanner(DefaultSavePlanner):
    """Writes non-tensor values (optimizer hyperparameters) as JSON, not with torch.save."""

    def transform_object(self, write_item: WriteItem, object: Any) -> Any:
        if write_item.type == WriteItemType.BYTE_IO:
            return io.BytesIO(value_to_json(object))
        return object


class JsonLoadPlanner(DefaultLoadPlanner):
    """Reads non-tensor values from JSON; DCP's own planner would unpickle them."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        self.load_value(read_item, value_from_json(value.getvalue(), read_item.dest_index.fqn))

    def load_value(self, read_item: ReadItem, loaded: object) -> None:
        """Put a value read from the checkpoint where the state dict wants it."""
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._nested_dict import set_element

            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], loaded)
        else:
            self.state_dict[read_item.dest_index.fqn] = loaded


class JsonWriter(dcp.FileSystemWriter):
    """One shard file per rank of raw tensor bytes and JSON values, then `.metadata` as JSON."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, single_file_per_rank=True, sync_files=True, thread_count=1)
        #: shard files the coordinator could not see: the checkpoint is then left incomplete
        self.missing: list[str] = []

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        name = f"{plan.storage_data.prefix}0.distcp"
        results: list[WriteResult] = []
        with open(Path(self.path) / name, "wb") as stream:
            for item in plan.items:
                data = planner.resolve_data(item)
                at = stream.tell()
                if item.type == WriteItemType.BYTE_IO:
                    assert isinstance(data, io.BytesIO)
                    stream.write(data.getbuffer())
                else:
                    assert isinstance(data, torch.Tensor)
                    stream.write(_raw(data))
                length = stream.tell() - at
                info = _StorageInfo(name, at, length)
                results.append(
                    WriteResult(index=item.index, size_in_bytes=length, storage_data=info)
                )
            stream.flush()
            os.fsync(stream.fileno())
        done: Future[list[WriteResult]] = Future()
        done.set_result(results)
        return done

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        # every rank's shard must be where the coordinator writes `.metadata` (a run root
        # the nodes do not share leaves some elsewhere): without it, no metadata is written
        shards = {r.storage_data.relative_path for rank in results for r in rank}
        self.missing = sorted(s for s in shards if not (Path(self.path) / s).is_file())
        if self.missing:
            return
        metadata.version = CURRENT_DCP_VERSION
        metadata.storage_data = {r.index: r.storage_data for rank in results for r in rank}
        metadata.storage_meta = self.storage_meta()
        tmp = Path(self.path) / f"{METADATA_FILE}.tmp"
        _fsync_write(tmp, metadata_to_json(metadata))
        tmp.replace(Path(self.path) / METADATA_FILE)


class JsonReader(dcp.FileSystemReader):
    """Reads what `JsonWriter` wrote, checking every size; no pickle, no torch.load.

    A checkpoint of an earlier Trainboard (pickled `.metadata`, `torch.save` items in the
    shards) is read too, statically, by `legacy_dcp`: `legacy` is then True.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self._chunks: dict[tuple[str, tuple[int, ...]], tuple[torch.dtype, torch.Size]] = {}
        self.legacy = False

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = Path(self.path) / METADATA_FILE
        if path.stat().st_size > MAX_METADATA_BYTES:
            raise refused(f"{path} is larger than {MAX_METADATA_BYTES} bytes")
        raw = path.read_bytes()
        self.legacy = raw[:1] == b"\x80"  # a pickle: DCP's stock writer, before JSON
        metadata = metadata_from_pickle(raw) if self.legacy else metadata_from_json(raw)
        assert metadata.storage_meta is not None
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(
        self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any
    ) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        with open(Path(self.path) / METADATA_FILE, "rb") as stream:  # every rank, not only
            self.legacy = stream.read(1) == b"\x80"  # the one DCP had read the metadata
        self._chunks = {
            (fqn, tuple(chunk.offsets)): (entry.properties.dtype, chunk.sizes)
            for fqn, entry in metadata.state_dict_metadata.items()
            if isinstance(entry, TensorStorageMetadata)
            for chunk in entry.chunks
        }

    def _info(self, index: MetadataIndex) -> _StorageInfo:
        info = self.storage_data.get(index)
        if info is None:
            raise refused(f"no storage for {index.fqn} at {index.offset}")
        return info

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        per_file: dict[str, list[ReadItem]] = {}
        for item in plan.items:
            per_file.setdefault(self._info(item.storage_index).relative_path, []).append(item)
        for name, items in per_file.items():
            with open(Path(self.path) / name, "rb") as stream:
                for item in items:
                    self._read_item(stream, item, planner)
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def _read_item(self, stream: io.BufferedReader, item: ReadItem, planner: LoadPlanner) -> None:
        info = self._info(item.storage_index)
        if info.offset + info.length > os.fstat(stream.fileno()).st_size:  # before allocating
            raise refused(f"{info.relative_path} is shorter than its metadata says")
        buffer = bytearray(info.length)
        stream.seek(info.offset)
        if stream.readinto(buffer) != info.length:
            raise refused(f"{info.relative_path} changed while it was read")
        if self.legacy:
            self._read_legacy_item(bytes(buffer), item, planner)
            return
        if item.type == LoadItemType.BYTE_IO:
            planner.load_bytes(item, io.BytesIO(buffer))
            return
        dtype, sizes = self._chunk(item)
        if len(buffer) != sizes.numel() * dtype.itemsize:
            raise refused(
                f"{item.storage_index.fqn} holds {len(buffer)} bytes, not a {dtype} of "
                f"{list(sizes)}"
            )
        self._commit(_from_raw(buffer, dtype, sizes), item, planner)

    def _read_legacy_item(self, blob: bytes, item: ReadItem, planner: LoadPlanner) -> None:
        """An item DCP's stock writer saved: a `torch.save` archive, read statically."""
        found = read_archive(blob, item.storage_index.fqn)
        if item.type == LoadItemType.BYTE_IO:
            if not isinstance(planner, JsonLoadPlanner):
                raise TypeError("legacy checkpoints are loaded with a JsonLoadPlanner")
            planner.load_value(item, found)
            return
        dtype, sizes = self._chunk(item)
        if not isinstance(found, torch.Tensor) or (found.dtype, found.size()) != (dtype, sizes):
            raise refused(f"{item.storage_index.fqn} is not the {dtype} of {list(sizes)} saved")
        self._commit(found, item, planner)

    def _chunk(self, item: ReadItem) -> tuple[torch.dtype, torch.Size]:
        index = item.storage_index
        found = self._chunks.get((index.fqn, tuple(index.offset or ())))
        if found is None:
            raise refused(f"no tensor chunk {index.fqn} at {index.offset}")
        return found

    def _commit(self, chunk: torch.Tensor, item: ReadItem, planner: LoadPlanner) -> None:
        index = item.storage_index
        tensor = narrow_tensor_by_index(chunk, item.storage_offsets, item.lengths)
        target = planner.resolve_tensor(item).detach()
        if target.size() != tensor.size():
            raise refused(
                f"{index.fqn}: {list(tensor.size())} cannot load into {list(target.size())}"
            )
        target.copy_(tensor)
        planner.commit_tensor(item, target)


def unwrap(error: BaseException) -> BaseException:
    """The CheckpointRefused a rank raised inside DCP (which wraps it), else `error` itself."""
    for failure in getattr(error, "failures", {}).values():
        if isinstance(failure[0], CheckpointRefused):
            return failure[0]
    return error
