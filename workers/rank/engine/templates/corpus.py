"""The gpt template's text: docstrings of Python's own standard library (nothing downloaded)."""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings

#: modules whose docstrings make the corpus (about 190 kB of English prose on CPython 3.11+)
MODULES = (
    "argparse", "collections", "csv", "dataclasses", "email", "enum", "functools", "heapq",
    "http", "itertools", "json", "logging", "pathlib", "random", "re", "statistics",
    "string", "textwrap", "typing", "unittest",
)  # fmt: skip


@functools.cache
def text() -> str:
    """The corpus: each module's docstring, then those of the names it defines, sorted."""
    parts: list[str] = []
    with warnings.catch_warnings():  # some members (typing.io) warn when touched
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in MODULES:
            module = importlib.import_module(name)
            members = sorted(vars(module).items())
            objects = [module]
            objects += [obj for _, obj in members if getattr(obj, "__module__", None) == name]
            parts += [doc for obj in objects if (doc := inspect.getdoc(obj))]
    return "\n\n".join(parts)
