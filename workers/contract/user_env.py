"""A job's own environment variables (`spec.env`) and free-form values: what is refused, and why."""

from __future__ import annotations

import math
import re
from typing import Any

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_ENV_VARS = 64
MAX_ENV_NAME = 128
MAX_ENV_VALUE = 4096

#: set by torchrun or by Trainboard for each rank: a job must not override them
_RESERVED = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "CUDA_VISIBLE_DEVICES",
        # what the loader, the interpreter or a shell reads before user code runs
        "PATH",
        "HOME",
        "BASH_ENV",
        "ENV",
        "IFS",
        "NODE_OPTIONS",
        "GCONV_PATH",
        "GLIBC_TUNABLES",
    }
)
_RESERVED_PREFIXES = ("TRAINBOARD_", "TORCHELASTIC_", "ROLE_", "LD_", "PYTHON", "PERL5", "MALLOC_")


def env_name_problem(name: str) -> str | None:
    """Why a variable name is refused in a job's env, or None when it is allowed."""
    if not 1 <= len(name) <= MAX_ENV_NAME or not ENV_NAME.fullmatch(name):
        return (
            f"variable {name[:70]!r} must be 1-{MAX_ENV_NAME} letters, digits and _, "
            "not starting with a digit"
        )
    if name in _RESERVED or name.startswith(_RESERVED_PREFIXES):
        return (
            f"variable {name!r} is reserved: Trainboard, torchrun, the loader or the "
            "interpreter set or read it (TRAINBOARD_*, RANK, MASTER_*, CUDA_VISIBLE_DEVICES, "
            "LD_*, PYTHON*, PATH, HOME, ...)"
        )
    return None


def check_env(env: dict[str, str]) -> dict[str, str]:
    """The env unchanged, or ValueError naming the first refused variable."""
    if len(env) > MAX_ENV_VARS:
        raise ValueError(f"at most {MAX_ENV_VARS} variables")
    for name, value in env.items():
        problem = env_name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        if len(value) > MAX_ENV_VALUE:
            raise ValueError(f"variable {name!r}: value longer than {MAX_ENV_VALUE} characters")
        if "\x00" in value:
            raise ValueError(f"variable {name!r}: value must not contain NUL bytes")
    return env


def non_finite_path(value: Any, path: str = "") -> str | None:
    """Where a non-finite float hides in a JSON-like value (a dotted path), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "value"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite_path(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None
