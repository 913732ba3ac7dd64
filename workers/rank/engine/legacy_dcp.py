"""Checkpoints written before JSON metadata, read statically: their pickles are never unpickled.

Trainboard up to d80b501 saved with DCP's stock `FileSystemWriter`: `.metadata` is a pickled
`Metadata` (protocol 4) and every shard item is a `torch.save` archive (a stored zip holding
`data.pkl`, protocol 2, and raw storage bytes). `read_pickle` interprets pickle opcodes into
plain data: it imports nothing and calls nothing. A global is only a name looked up in a
closed table of DCP's own metadata types (module and name compared as strings, so a dotted
name or any other module is refused); REDUCE, NEWOBJ and BUILD only build those types'
plain stand-ins; PERSID, EXT*, INST and OBJ are refused. The metadata then becomes the same
document the JSON path reads, and goes through its checks (`dcp_json.metadata_from_document`).
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributed.checkpoint.metadata import Metadata

from workers.rank.engine.dcp_json import (
    DTYPES,
    FORMAT,
    VERSION,
    CheckpointRefused,
    metadata_from_document,
    refused,
)

_DCP = "torch.distributed.checkpoint.metadata"
#: the dataclasses DCP's metadata is made of: NEWOBJ with no arguments, then BUILD
_CLASSES = {
    (_DCP, "Metadata"),
    (_DCP, "TensorStorageMetadata"),
    (_DCP, "ChunkStorageMetadata"),
    (_DCP, "BytesStorageMetadata"),
    (_DCP, "MetadataIndex"),
    (_DCP, "TensorProperties"),
    (_DCP, "StorageMeta"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
}
#: no size, stride or offset of a real tensor comes near this (torch's are 64-bit signed)
_MAX_INT = 1 << 62
_MEM_FORMATS = {"TORCH_CONTIGUOUS_FORMAT", "TORCH_CHANNELS_LAST", "TORCH_PRESERVE_FORMAT"}
#: storage classes `torch.save` names for a tensor's elements, by the dtype they hold
_STORAGES = {
    "FloatStorage": torch.float32,
    "DoubleStorage": torch.float64,
    "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
    "ComplexFloatStorage": torch.complex64,
    "ComplexDoubleStorage": torch.complex128,
}


@dataclass(frozen=True)
class _Global:
    """A name a pickle pushed: only ever compared, never resolved."""

    module: str
    name: str


@dataclass(eq=False)
class _Obj:
    """A stand-in for one of DCP's dataclasses: its class name and its pickled state."""

    cls: str
    state: Any = None


@dataclass(frozen=True)
class _Const:
    """A torch constant named in the pickle (a layout, a memory format)."""

    kind: str
    name: str


@dataclass(frozen=True)
class _Storage:
    """A `torch.save` persistent id: which archive record holds the elements, and their type."""

    dtype: torch.dtype
    key: str
    numel: int


@dataclass(frozen=True)
class _TensorRef:
    """A tensor `torch.save` pickled: a view of a storage record."""

    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


_Reducer = Callable[[tuple[Any, ...]], Any]


@dataclass
class _Rules:
    """What one kind of pickle may name: reducible globals, dataclasses, persistent ids."""

    reducers: dict[tuple[str, str], _Reducer]
    classes: set[tuple[str, str]] = field(default_factory=set)
    persistent: Callable[[Any], Any] | None = None
    names: set[tuple[str, str]] = field(default_factory=set)  # pushed only as arguments
    dtypes: bool = False  # torch.float32 and the like (GLOBAL torch float32)


class _Refused(Exception):
    """Why a pickle is refused; the caller names the file."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: object) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(_is_int(v) and 0 <= v < _MAX_INT for v in value):
        raise _Refused(f"holds a size that is not a tuple of integers in [0, {_MAX_INT})")
    return value


def _reduce_size(args: tuple[Any, ...]) -> tuple[int, ...]:
    if len(args) != 1:
        raise _Refused("calls torch.Size with other than one tuple")
    return _ints(args[0])


def _reduce_layout(args: tuple[Any, ...]) -> _Const:
    if args != ("torch.strided",):
        raise _Refused(f"names the layout {args!r}; only torch.strided tensors are read")
    return _Const("layout", "strided")


def _reduce_getattr(args: tuple[Any, ...]) -> _Const:
    # the pickled form of a memory-format enum member: getattr(_MEM_FORMAT_ENCODING, name)
    if (
        len(args) == 2
        and args[0] == _Global(_DCP, "_MEM_FORMAT_ENCODING")
        and isinstance(args[1], str)
        and args[1] in _MEM_FORMATS
    ):
        return _Const("memory_format", args[1])
    raise _Refused("calls builtins.getattr on something other than a DCP memory format")


def _reduce_mem_format(args: tuple[Any, ...]) -> _Const:
    if len(args) == 1 and args[0] in (1, 2, 3):  # the enum by value (pickle protocols < 4)
        return _Const("memory_format", str(args[0]))
    raise _Refused("names an unknown DCP memory format")


def _reduce_path(args: tuple[Any, ...]) -> str:
    if not args or not all(isinstance(a, str) for a in args):
        raise _Refused("builds a path from other than strings")
    return "/".join(args)


def _reduce_ordered_dict(args: tuple[Any, ...]) -> dict[Any, Any]:
    if args != ():
        raise _Refused("calls collections.OrderedDict with arguments")
    return {}


def _reduce_rebuild_tensor(args: tuple[Any, ...]) -> _TensorRef:
    if len(args) not in (6, 7):
        raise _Refused("calls torch._utils._rebuild_tensor_v2 with unexpected arguments")
    storage, offset, size, stride, _requires_grad, hooks, *rest = args
    if not isinstance(storage, _Storage) or not _is_int(offset) or offset < 0:
        raise _Refused("rebuilds a tensor from something other than a storage record")
    if hooks != {} or rest not in ([], [None], [{}]):
        raise _Refused("rebuilds a tensor with hooks or metadata")
    size, stride = _ints(size), _ints(stride)
    if len(size) != len(stride) or offset >= _MAX_INT:
        raise _Refused("rebuilds a tensor whose size and stride differ in length")
    return _TensorRef(storage, offset, size, stride)


def _persistent_storage(pid: Any) -> _Storage:
    """`torch.save`'s id of a storage: ('storage', <dtype>Storage, key, location, numel)."""
    if (
        isinstance(pid, tuple)
        and len(pid) == 5
        and pid[0] == "storage"
        and isinstance(pid[1], _Global)
        and pid[1].module == "torch"
        and pid[1].name in _STORAGES
        and isinstance(pid[2], str)
        and re.fullmatch(r"\d{1,9}", pid[2])
        and isinstance(pid[3], str)
        and _is_int(pid[4])
        and pid[4] >= 0
    ):
        return _Storage(_STORAGES[pid[1].name], pid[2], pid[4])
    raise _Refused("holds a persistent id that is not a torch.save storage record")


#: `.metadata`: DCP's dataclasses and the few torch values they hold
METADATA_RULES = _Rules(
    reducers={
        ("torch", "Size"): _reduce_size,
        ("torch.serialization", "_get_layout"): _reduce_layout,
        ("builtins", "getattr"): _reduce_getattr,
        (_DCP, "_MEM_FORMAT_ENCODING"): _reduce_mem_format,
        ("pathlib", "PosixPath"): _reduce_path,
        ("pathlib", "PurePosixPath"): _reduce_path,
        ("collections", "OrderedDict"): _reduce_ordered_dict,
    },
    classes=_CLASSES,
    names={(_DCP, "_MEM_FORMAT_ENCODING")},
    dtypes=True,
)
#: a shard item's `data.pkl`: a plain value, or one tensor of a storage record
ARCHIVE_RULES = _Rules(
    reducers={
        ("torch._utils", "_rebuild_tensor_v2"): _reduce_rebuild_tensor,
        ("collections", "OrderedDict"): _reduce_ordered_dict,
    },
    persistent=_persistent_storage,
    names={("torch", name) for name in _STORAGES},
)

_MARK = object()
#: opcodes that name or call code by other means than a global: always refused
_REFUSED_OPS = {
    b"\x82": "EXT1",
    b"\x83": "EXT2",
    b"\x84": "EXT4",
    b"P": "PERSID",
    b"Q": "BINPERSID",
    b"i": "INST",
    b"o": "OBJ",
}


def _allowed_global(rules: _Rules, module: object, name: object) -> _Global:
    if not isinstance(module, str) or not isinstance(name, str):
        raise _Refused("names a global with a non-string module or name")
    key = (module, name)
    dtype = rules.dtypes and module == "torch" and name in DTYPES
    if key in rules.reducers or key in rules.classes or key in rules.names or dtype:
        return _Global(module, name)
    raise _Refused(f"names {module}.{name}, not one of DCP's metadata types")


class _Machine:
    """The pickle virtual machine's stack and memo, with no side effects beyond them."""

    def __init__(self, raw: bytes, rules: _Rules) -> None:
        self.raw, self.rules, self.at = raw, rules, 0
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[int, Any] = {}

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.raw):
            raise _Refused("is truncated")
        chunk = self.raw[self.at : self.at + n]
        self.at += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def pop(self) -> Any:
        if not self.stack or self.stack[-1] is _MARK:
            raise _Refused("pops an empty stack")
        return self.stack.pop()

    def pop_mark(self) -> list[Any]:
        if not self.marks:
            raise _Refused("closes a mark it never opened")
        start = self.marks.pop()
        items = self.stack[start + 1 :]
        del self.stack[start:]
        return items

    def text(self, n: int) -> str:
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused("holds a string that is not UTF-8") from None

    def top(self) -> Any:
        if not self.stack or self.stack[-1] is _MARK:
            raise _Refused("reads an empty stack")
        return self.stack[-1]

    def get(self, index: int) -> Any:
        if index not in self.memo:
            raise _Refused("reads a memo entry it never wrote")
        return self.memo[index]

    def reduce(self, func: Any, args: Any) -> Any:
        if not isinstance(func, _Global) or not isinstance(args, tuple):
            raise _Refused("calls something that is not a known global")
        reducer = self.rules.reducers.get((func.module, func.name))
        if reducer is None:
            raise _Refused(f"calls {func.module}.{func.name}, which is never called")
        return reducer(args)

    def new(self, cls: Any, args: Any) -> _Obj:
        key = (cls.module, cls.name) if isinstance(cls, _Global) else None
        if key not in self.rules.classes or args != ():
            raise _Refused("creates an object that is not one of DCP's metadata types")
        return _Obj(cls.name)

    def build(self, state: Any) -> None:
        target = self.pop()
        if not isinstance(target, _Obj) or target.state is not None:
            raise _Refused("sets the state of something other than a new DCP metadata object")
        target.state = state
        self.stack.append(target)

    def run(self) -> Any:  # noqa: C901 - one branch per opcode, as pickletools lists them
        push = self.stack.append
        while True:
            op = self.take(1)
            if op == b".":  # STOP
                if len(self.stack) != 1 or self.marks:
                    raise _Refused("stops with other than one value on its stack")
                return self.stack[0]
            if op == b"\x80":  # PROTO
                if self.take(1)[0] > 5:
                    raise _Refused("has an unknown protocol")
            elif op == b"\x95":  # FRAME: a length hint only
                self.take(8)
            elif op == b"(":
                self.marks.append(len(self.stack))
                push(_MARK)
            elif op == b"0":
                self.pop()
            elif op == b"1":
                self.pop_mark()
            elif op == b"2":
                push(self.top())
            elif op == b"N":
                push(None)
            elif op in (b"\x88", b"\x89"):
                push(op == b"\x88")
            elif op == b"J":
                push(self.unpack("<i"))
            elif op == b"K":
                push(self.take(1)[0])
            elif op == b"M":
                push(self.unpack("<H"))
            elif op in (b"\x8a", b"\x8b"):  # LONG1, LONG4
                n = self.take(1)[0] if op == b"\x8a" else self.unpack("<i")
                push(int.from_bytes(self.take(n), "little", signed=True))
            elif op == b"G":
                push(self.unpack(">d"))
            elif op in (b"X", b"\x8c", b"\x8d"):  # BINUNICODE, SHORT_, 8
                n = {b"X": "<I", b"\x8d": "<Q"}.get(op)
                push(self.text(self.unpack(n) if n else self.take(1)[0]))
            elif op in (b"B", b"C", b"\x8e"):  # BINBYTES, SHORT_, 8
                n = {b"B": "<I", b"\x8e": "<Q"}.get(op)
                push(self.take(self.unpack(n) if n else self.take(1)[0]))
            elif op == b")":
                push(())
            elif op == b"t":
                push(tuple(self.pop_mark()))
            elif op in (b"\x85", b"\x86", b"\x87"):  # TUPLE1..3
                items = [self.pop() for _ in range(op[0] - 0x84)]
                push(tuple(reversed(items)))
            elif op == b"]":
                push([])
            elif op == b"l":
                push(self.pop_mark())
            elif op in (b"a", b"e"):  # APPEND, APPENDS
                items = [self.pop()] if op == b"a" else self.pop_mark()
                target = self.pop()
                if not isinstance(target, list):
                    raise _Refused("appends to something that is not a list")
                target.extend(items)
                push(target)
            elif op == b"}":
                push({})
            elif op in (b"d", b"s", b"u"):  # DICT, SETITEM, SETITEMS
                items = [self.pop(), self.pop()][::-1] if op == b"s" else self.pop_mark()
                target = {} if op == b"d" else self.pop()
                if not isinstance(target, dict) or len(items) % 2:
                    raise _Refused("sets items of something that is not a dict")
                try:
                    for k, v in zip(items[::2], items[1::2], strict=True):
                        target[k] = v
                except TypeError:
                    raise _Refused("uses an unhashable dict key") from None
                push(target)
            elif op in (b"h", b"j"):  # BINGET, LONG_BINGET
                push(self.get(self.take(1)[0] if op == b"h" else self.unpack("<I")))
            elif op in (b"q", b"r"):  # BINPUT, LONG_BINPUT
                index = self.take(1)[0] if op == b"q" else self.unpack("<I")
                self.memo[index] = self.top()
            elif op == b"\x94":  # MEMOIZE
                self.memo[len(self.memo)] = self.top()
            elif op == b"c":  # GLOBAL: "module\nname\n"
                module, name = self._line(), self._line()
                push(_allowed_global(self.rules, module, name))
            elif op == b"\x93":  # STACK_GLOBAL
                name = self.pop()
                push(_allowed_global(self.rules, self.pop(), name))
            elif op == b"R":
                args = self.pop()
                push(self.reduce(self.pop(), args))
            elif op == b"\x81":  # NEWOBJ
                args = self.pop()
                push(self.new(self.pop(), args))
            elif op == b"\x92":  # NEWOBJ_EX
                kwargs, args = self.pop(), self.pop()
                if kwargs != {}:
                    raise _Refused("creates an object with keyword arguments")
                push(self.new(self.pop(), args))
            elif op == b"b":
                self.build(self.pop())
            elif op == b"Q" and self.rules.persistent is not None:  # BINPERSID
                push(self.rules.persistent(self.pop()))
            else:
                name = _REFUSED_OPS.get(op, repr(op))
                raise _Refused(f"uses the pickle opcode {name}, which this reader refuses")

    def _line(self) -> str:
        end = self.raw.find(b"\n", self.at, self.at + 256)
        if end < 0:
            raise _Refused("names a global without a line end")
        text = self.text(end - self.at)
        self.take(1)
        return text


def read_pickle(raw: bytes, rules: _Rules) -> Any:
    """The plain data a pickle describes, under `rules`; `_Refused` says why not."""
    return _Machine(raw, rules).run()


class _Budget:
    """Elements a pickle may expand to: memo references can share one list many times over."""

    def __init__(self, raw: bytes, what: str) -> None:
        self.left, self.what = 64 * len(raw) + 65536, what

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise refused(f"{self.what} repeats shared parts far beyond its own size")


def _state(obj: object, cls: str, where: str) -> dict[str, Any]:
    if not isinstance(obj, _Obj) or obj.cls != cls:
        raise refused(f"the pickled .metadata: {where} is not a {cls}")
    if not isinstance(obj.state, dict):
        raise refused(f"the pickled .metadata: {where} has no {cls} fields")
    return obj.state


def _sizes(value: object, where: str, budget: _Budget) -> list[int]:
    if not isinstance(value, tuple):
        raise refused(f"the pickled .metadata: {where} is not a tuple")
    budget.spend(1 + len(value))
    return list(value)


def _entry(value: object, fqn: str, budget: _Budget) -> dict[str, Any]:
    where = f"entry {fqn!r}"
    if isinstance(value, _Obj) and value.cls == "BytesStorageMetadata":
        return {"kind": "bytes"}
    state = _state(value, "TensorStorageMetadata", where)
    props = state.get("properties")
    fields = props.state if isinstance(props, _Obj) and props.cls == "TensorProperties" else None
    if isinstance(fields, tuple):  # TensorProperties.__getstate__: dtype, layout, ...
        dtype, layout = fields[:2] if len(fields) >= 2 else (None, None)
    elif isinstance(fields, dict):
        dtype, layout = fields.get("dtype"), fields.get("layout")
    else:
        raise refused(f"the pickled .metadata: {where} has no tensor properties")
    if not isinstance(dtype, _Global) or dtype.module != "torch" or dtype.name not in DTYPES:
        raise refused(f"the pickled .metadata: {where} has no torch dtype")
    if layout not in (_Const("layout", "strided"), None):
        raise refused(f"the pickled .metadata: {where} is not a strided tensor")
    chunks = state.get("chunks")
    if not isinstance(chunks, list):
        raise refused(f"the pickled .metadata: {where} has no chunk list")
    return {
        "kind": "tensor",
        "dtype": dtype.name,
        "size": _sizes(state.get("size"), where, budget),
        "chunks": [
            {
                "offsets": _sizes(c.get("offsets"), where, budget),
                "sizes": _sizes(c.get("sizes"), where, budget),
            }
            for c in (_state(chunk, "ChunkStorageMetadata", where) for chunk in chunks)
        ],
    }


def _storage(index: object, info: object, budget: _Budget) -> dict[str, Any]:
    key = _state(index, "MetadataIndex", "storage index")
    where = f"storage of {key.get('fqn')!r}"
    found = _state(info, "_StorageInfo", where)
    if found.get("transform_descriptors"):
        raise refused(f"the pickled .metadata: {where} has storage transforms")
    offset = key.get("offset")
    return {
        "fqn": key.get("fqn"),
        "offset": None if offset is None else _sizes(offset, where, budget),
        "index": key.get("index"),
        "file": found.get("relative_path"),
        "at": found.get("offset"),
        "length": found.get("length"),
    }


def document_from_pickle(raw: bytes) -> dict[str, Any]:
    """The JSON path's document for a DCP `.metadata` pickle, read statically."""
    try:
        top = read_pickle(raw, METADATA_RULES)
    except _Refused as why:
        raise refused(f"the checkpoint's .metadata is a pickle that {why}") from None
    state = _state(top, "Metadata", "top level")
    entries, planner = state.get("state_dict_metadata"), state.get("planner_data") or {}
    storage, meta = state.get("storage_data") or {}, state.get("storage_meta")
    if not isinstance(entries, dict) or not isinstance(planner, dict):
        raise refused("the pickled .metadata has no state_dict_metadata")
    if not all(isinstance(k, str) for k in [*entries, *planner]):
        raise refused("the pickled .metadata names an entry by other than a string")
    if not isinstance(storage, dict):
        raise refused("the pickled .metadata: storage_data is not a dict")
    meta_fields = _state(meta, "StorageMeta", "storage_meta") if meta is not None else {}
    budget = _Budget(raw, "the checkpoint's .metadata")
    return {
        "format": FORMAT,
        "version": VERSION,
        "dcp_version": state.get("version"),
        "state_dict_metadata": {k: _entry(v, k, budget) for k, v in entries.items()},
        "planner_data": {k: _sizes(v, "planner_data", budget) for k, v in planner.items()},
        "storage_data": [_storage(k, v, budget) for k, v in storage.items()],
        "storage_meta": {
            "checkpoint_id": meta_fields.get("checkpoint_id"),
            "save_id": meta_fields.get("save_id"),
            "modules": meta_fields.get("modules", []),
        },
    }


def metadata_from_pickle(raw: bytes) -> Metadata:
    """A DCP `Metadata` from a `.metadata` pickle, through the JSON path's checks."""
    try:
        return metadata_from_document(document_from_pickle(raw))
    except RecursionError:
        raise refused("the checkpoint's .metadata is a pickle nested too deeply") from None


def _archive(blob: bytes, fqn: str) -> tuple[zipfile.ZipFile, str]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
        names = [n for n in archive.namelist() if n.endswith("/data.pkl")]
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise refused(f"{fqn} is not a torch.save archive ({exc})") from None
    if len(names) != 1:
        raise refused(f"{fqn} is not a torch.save archive (no single data.pkl)")
    return archive, names[0].removesuffix("data.pkl")


def _record(archive: zipfile.ZipFile, name: str, fqn: str, limit: int) -> bytes:
    try:
        info = archive.getinfo(name)
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > limit:
            raise refused(f"{fqn}: {name} is compressed or larger than its archive")
        return archive.read(info)
    except KeyError:
        raise refused(f"{fqn}: its archive has no {name}") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise refused(f"{fqn}: {name} cannot be read ({exc})") from None


def _tensor(
    ref: _TensorRef, archive: zipfile.ZipFile, prefix: str, fqn: str, limit: int
) -> torch.Tensor:
    order = f"{prefix}byteorder"
    if order in archive.namelist() and _record(archive, order, fqn, 16) != b"little":
        raise refused(f"{fqn} was saved big-endian")
    data = bytearray(_record(archive, f"{prefix}data/{ref.storage.key}", fqn, limit))
    dtype, numel = ref.storage.dtype, ref.storage.numel
    if len(data) != numel * dtype.itemsize:
        raise refused(f"{fqn}: its storage holds {len(data)} bytes, not {numel} {dtype}")
    last = ref.offset + sum((n - 1) * s for n, s in zip(ref.size, ref.stride, strict=True))
    if any(n == 0 for n in ref.size):
        return torch.empty(ref.size, dtype=dtype)
    if last >= numel:
        raise refused(f"{fqn} reaches past its storage")
    flat = torch.frombuffer(data, dtype=torch.uint8).view(dtype)
    return flat.as_strided(ref.size, ref.stride, ref.offset)


def read_archive(blob: bytes, fqn: str) -> object:
    """The value or tensor a `torch.save` archive (one legacy shard item) holds, read statically."""
    archive, prefix = _archive(blob, fqn)
    raw = _record(archive, f"{prefix}data.pkl", fqn, len(blob))
    try:
        value = read_pickle(raw, ARCHIVE_RULES)
        if isinstance(value, _TensorRef):
            return _tensor(value, archive, prefix, fqn, len(blob))
        return _plain(value, fqn, _Budget(raw, f"the value of {fqn}"))
    except _Refused as why:
        raise refused(f"the value of {fqn} is a pickle that {why}") from None
    except RecursionError:
        raise refused(f"the value of {fqn} is a pickle nested too deeply") from None


def _plain(value: object, fqn: str, budget: _Budget) -> object:
    """A hyperparameter as it was saved: None, bool, number, string, or tuples/lists of them."""
    budget.spend(1)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_plain(v, fqn, budget) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v, fqn, budget) for k, v in value.items()}
    raise refused(f"the value of {fqn} is not a plain value")


__all__ = ["CheckpointRefused", "document_from_pickle", "metadata_from_pickle", "read_archive"]
