"""Rows as PostgreSQL binary COPY data, built a column at a time with numpy.

psycopg's `write_row` formats each value in turn; building the same bytes from whole
columns costs a fraction of that (docs/benchmarks.md). Integer, float, boolean and
text columns without NULLs are encoded here; for anything else `encode` returns None
and the caller falls back to `write_row`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from sqlalchemy import BigInteger, Boolean, Column, Float, Integer, String

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # flags 0, no header extension
TRAILER = b"\xff\xff"
TEXT = "text"
#: a text column with more distinct values than this (log lines) is left to write_row
MAX_DISTINCT_TEXTS = 256
Texts = dict[int, tuple[list[bytes], np.ndarray]]
Buffer = bytes | memoryview
#: rows per part of a COPY stream (~0.6 MB of metric points)
ROWS_PER_PART = 8192


def column_format(column: Column[Any]) -> str | None:
    """The numpy format of a column's binary COPY value (TEXT for strings), or None."""
    kind = column.type
    if isinstance(kind, BigInteger):
        return ">i8"
    if isinstance(kind, Integer):
        return ">i4"
    if isinstance(kind, Float):
        return ">f8"
    if isinstance(kind, Boolean):
        return "?"
    if isinstance(kind, String):
        return TEXT
    return None


def encode(formats: Sequence[str], columns: Sequence[Iterable[Any]], count: int) -> bytes | None:
    """`count` rows, given column by column, as one binary COPY stream; None if unsupported."""
    parts = encode_parts(formats, columns, count)
    return None if parts is None else b"".join(parts)


def encode_parts(
    formats: Sequence[str], columns: Sequence[Iterable[Any]], count: int, rows: int = ROWS_PER_PART
) -> Iterator[Buffer] | None:
    """The binary COPY stream of `count` rows in parts of up to `rows` rows; None if unsupported.

    The parts are built as they are asked for, so the server can parse one while the next
    is encoded; each is a view of its array (no copy into bytes).
    """
    taken = _columns(formats, columns, count)
    if taken is None:
        return None
    return _parts(formats, *taken, count, rows)


def _parts(
    formats: Sequence[str], fixed: dict[int, np.ndarray], texts: Texts, count: int, rows: int
) -> Iterator[Buffer]:
    yield SIGNATURE
    for start in range(0, count, rows):
        stop = min(count, start + rows)
        some = {i: values[start:stop] for i, values in fixed.items()}
        coded: Texts = {i: (encoded, codes[start:stop]) for i, (encoded, codes) in texts.items()}
        for lengths, members in _layouts(coded, stop - start):
            yield _tuples(formats, some, coded, lengths, members, stop - start)
    yield TRAILER


def _columns(
    formats: Sequence[str], columns: Sequence[Iterable[Any]], count: int
) -> tuple[dict[int, np.ndarray], Texts] | None:
    """Fixed-size columns as native arrays and text columns as codes; None if unsupported."""
    fixed: dict[int, np.ndarray] = {}
    texts: Texts = {}
    for i, (fmt, values) in enumerate(zip(formats, columns, strict=True)):
        if fmt != TEXT:
            # fromiter refuses None and out-of-range integers, but makes None a float NaN
            native = fmt.replace(">", "=")
            if isinstance(values, np.ndarray):
                fixed[i] = values.astype(native, copy=False)
                if fixed[i] is not values and not np.array_equal(fixed[i], values):
                    raise OverflowError(f"a value out of range for {fmt}")
            else:
                try:
                    fixed[i] = np.fromiter(values, dtype=native, count=count)
                except TypeError:  # None among integers (a NULL): write_row writes it
                    return None
            if fmt == ">f8" and np.isnan(fixed[i]).any():
                return None  # NaN or None: write_row tells them apart
            continue
        listed = list(values)
        codes = dict.fromkeys(listed)
        if None in codes or len(codes) > MAX_DISTINCT_TEXTS:
            return None
        for code, value in enumerate(codes):
            codes[value] = code
        texts[i] = ([v.encode() for v in codes], np.array(list(map(codes.__getitem__, listed))))
    return fixed, texts


def _layouts(texts: Texts, count: int) -> list[tuple[dict[int, int], np.ndarray | None]]:
    """Groups of rows whose texts have the same byte lengths (one record layout each).

    Each group is the text columns' lengths and its rows (None: all rows).
    """
    if not texts:
        return [({}, None)]
    keys = np.zeros(count, dtype=np.int64)
    for encoded, codes in texts.values():
        keys = keys * 65_536 + np.array([len(e) for e in encoded], dtype=np.int64)[codes]
    distinct, inverse = np.unique(keys, return_inverse=True)
    groups = []
    for group, key in enumerate(distinct.tolist()):
        lengths = {}
        for i in reversed(list(texts)):
            key, lengths[i] = divmod(key, 65_536)
        rows = None if len(distinct) == 1 else np.flatnonzero(inverse == group)
        groups.append((lengths, rows))
    return groups


def _tuples(
    formats: Sequence[str],
    fixed: dict[int, np.ndarray],
    texts: Texts,
    lengths: dict[int, int],
    members: np.ndarray | None,
    count: int,
) -> memoryview:
    """The COPY tuples of the rows `members` (all rows if None), all of one layout."""
    sizes = [lengths[i] if fmt == TEXT else np.dtype(fmt).itemsize for i, fmt in enumerate(formats)]
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i, (fmt, size) in enumerate(zip(formats, sizes, strict=True)):
        fields.append((f"len{i}", ">i4"))
        if size:
            fields.append((f"v{i}", f"S{size}" if fmt == TEXT else fmt))
    out = np.empty(count if members is None else len(members), dtype=fields)
    out["count"] = len(formats)
    for i, size in enumerate(sizes):
        out[f"len{i}"] = size
        if i in fixed:
            out[f"v{i}"] = fixed[i] if members is None else fixed[i][members]
        elif size:
            encoded, codes = texts[i]
            table = np.array([e if len(e) == size else b"" for e in encoded], dtype=f"S{size}")
            out[f"v{i}"] = table[codes if members is None else codes[members]]
    return out.data.cast("B")
