"""Shapes the migrations repeat, written once: columns added or dropped in batch mode, keys.

These only spell alembic operations; nothing here reads the models, so a migration that
uses them does what it did when it was written.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import sqlalchemy as sa
from alembic import op

#: a 64-bit id on PostgreSQL; on SQLite an INTEGER, the only type that autoincrements
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def column(name: str, type_: Any, comment: str | None = None, **options: Any) -> sa.Column[Any]:
    """A nullable column (unless options say `nullable=False`)."""
    options.setdefault("nullable", True)
    return sa.Column(name, type_, comment=comment, **options)


def required(name: str, type_: Any, comment: str | None = None, **options: Any) -> sa.Column[Any]:
    """A NOT NULL column."""
    return sa.Column(name, type_, nullable=False, comment=comment, **options)


def curve_point(prefix: str) -> list[sa.Column[Any]]:
    """A curve block's first or last point: <prefix>_step, _time and _value, all required."""
    return [
        required(f"{prefix}_step", sa.Integer()),
        required(f"{prefix}_time", sa.Float()),
        required(f"{prefix}_value", sa.Float()),
    ]


def primary_key(table: str, column_name: str = "id") -> sa.PrimaryKeyConstraint:
    """The table's primary key on `column_name` (`id`, or a parent's id), named pk_<table>."""
    return sa.PrimaryKeyConstraint(column_name, name=op.f(f"pk_{table}"))


def foreign_key(
    table: str, column_name: str, target: str, *, ondelete: str | None = "CASCADE"
) -> sa.ForeignKeyConstraint:
    """`column_name` → `target`.id, named fk_<table>_<column>_<target>."""
    name = op.f(f"fk_{table}_{column_name}_{target}")
    return sa.ForeignKeyConstraint([column_name], [f"{target}.id"], name=name, ondelete=ondelete)


def unique(table: str, *columns: str) -> sa.UniqueConstraint:
    """A unique constraint over columns, named uq_<table>_<columns>."""
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{'_'.join(columns)}"))


def one_device(table: str) -> list[sa.schema.SchemaItem]:
    """id, node, device (its index) and kind: the columns naming one device of one node, what
    device samples and their rollups start with (the models' _OneDevice)."""
    return [
        required("id", BIG_ID),
        required("node", sa.String(length=64)),
        required("device", sa.Integer()),
        required("kind", sa.String(length=8)),
        primary_key(table),
    ]


def keyed_by_job_metric(table: str) -> list[sa.schema.SchemaItem]:
    """id, job_id (deleted with the job) and name: what a table of rows per job and metric
    starts with (the curve tables: rollups, blocks, seals)."""
    return [
        required("id", BIG_ID),
        required("job_id", sa.Integer()),
        required("name", sa.String(length=128)),
        foreign_key(table, "job_id", "jobs"),
        primary_key(table),
    ]


def curve_rollups() -> list[sa.schema.SchemaItem]:
    """curve_rollups as 0005 creates it (0009 drops it, and its downgrade makes it again)."""
    return [
        *keyed_by_job_metric("curve_rollups"),
        required("width", sa.Integer(), "steps per bucket"),
        required("through_attempt_id", sa.Integer(), "newest attempt the curve covers"),
        required("steps", sa.Integer(), "points of the full per-step curve"),
        required("buckets", sa.Integer()),
        *curve_point("first"),
        *curve_point("last"),
        required("data", sa.LargeBinary()),
        unique("curve_rollups", "job_id", "name", "width"),
    ]


def add_columns(table: str, *columns: sa.Column[Any]) -> None:
    """Add columns to a table in one batch (SQLite copies the table only where it must)."""
    with op.batch_alter_table(table, schema=None) as batch_op:
        for new in columns:
            batch_op.add_column(new)


def drop_columns(table: str, *names: str) -> None:
    """Drop columns of a table in one batch, in the order given."""
    with op.batch_alter_table(table, schema=None) as batch_op:
        for name in names:
            batch_op.drop_column(name)


def add_all(added: dict[str, tuple[sa.Column[Any], ...]]) -> None:
    """Add each table's columns, table by table (one batch each)."""
    for table, columns in added.items():
        add_columns(table, *columns)


def drop_all(added: dict[str, tuple[sa.Column[Any], ...]]) -> None:
    """Undo `add_all`: the tables in reverse order, each one's columns in reverse order."""
    for table, columns in reversed(added.items()):
        drop_columns(table, *(column.name for column in reversed(columns)))


def adding(
    added: dict[str, tuple[sa.Column[Any], ...]],
) -> tuple[Callable[[], None], Callable[[], None]]:
    """`upgrade` and `downgrade` of a revision that only adds columns: `add_all`, `drop_all`."""
    return partial(add_all, added), partial(drop_all, added)


def create_index(table: str, *columns: str, name: str | None = None, **options: Any) -> None:
    """A non-unique index, named ix_<table>_<columns> unless named."""
    index = op.f(name or f"ix_{table}_{'_'.join(columns)}")
    op.create_index(index, table, list(columns), unique=False, **options)


def drop_index(table: str, *columns: str, name: str | None = None) -> None:
    """Drop the index `create_index` made with the same arguments."""
    op.drop_index(op.f(name or f"ix_{table}_{'_'.join(columns)}"), table_name=table)
