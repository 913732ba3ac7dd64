"""Migrated PostgreSQL test databases: copies of one template, emptied and reused test after test.

Making a database is the dearest step of a PostgreSQL test here: CREATE DATABASE copies the
template's catalogs through the WAL. A database a test is done with is kept and, when the
next test asks for one, made as new again, in a fraction of that time (docs/benchmarks.md
"Fast test loop"): its other connections ended, every table emptied and its sequences
restarted (TRUNCATE ... RESTART IDENTITY), a deployment id of its own. A test that changed the
schema (a downgrade, an altered sequence, a table of its own) leaves a database whose schema
no longer matches the template's; that one is dropped and a fresh copy made instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import sqlalchemy as sa

from backend.migrate import upgrade

#: rows the migrations write: kept (the deployment row gets a new id), never emptied
SEEDED = ("alembic_version", "deployment")

#: everything of the public schema a test could change, one line each, hashed
_SCHEMA = """
SELECT md5(string_agg(line, '|' ORDER BY line)) FROM (
  SELECT format('c %s.%s %s %s %s', table_name, column_name, data_type, is_nullable,
                column_default) AS line
    FROM information_schema.columns WHERE table_schema = 'public'
  UNION ALL SELECT format('r %s %s', relname, relkind) FROM pg_class
    WHERE relnamespace = 'public'::regnamespace
  UNION ALL SELECT format('i %s', indexdef) FROM pg_indexes WHERE schemaname = 'public'
  UNION ALL SELECT format('k %s %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint
    WHERE connamespace = 'public'::regnamespace
  UNION ALL SELECT format('s %s %s %s %s %s', sequencename, increment_by, start_value,
                          min_value, max_value) FROM pg_sequences WHERE schemaname = 'public'
  UNION ALL SELECT format('f %s', proname) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
  UNION ALL SELECT format('t %s', tgname) FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL SELECT format('n %s', nspname) FROM pg_namespace
  UNION ALL SELECT format('x %s', extname) FROM pg_extension
  UNION ALL SELECT format('v %s', version_num) FROM alembic_version
  UNION ALL SELECT format('d %s', count(*)) FROM deployment
) AS schema
"""


class PostgresPool:
    """This test process's migrated PostgreSQL databases on the server at `base`."""

    def __init__(self, base: str, admin: Callable[[str], object]) -> None:
        self.base = base
        self._admin = admin
        self._template = ""
        self._schema = ""
        self._tables: list[str] = []
        self._free: list[str] = []
        self._made: list[str] = []

    def template(self) -> str:
        """The migrated template's name (made at the first call)."""
        if not self._template:
            name = f"tb_template_{uuid.uuid4().hex[:12]}"
            self._admin(f'CREATE DATABASE "{name}"')
            upgrade(f"{self.base}/{name}")
            engine = sa.create_engine(f"{self.base}/{name}")
            with engine.connect() as connection:
                self._schema = str(connection.execute(sa.text(_SCHEMA)).scalar())
                self._tables = sorted(set(sa.inspect(connection).get_table_names()) - set(SEEDED))
            engine.dispose()
            self._template = name
        return self._template

    def take(self) -> str:
        """The URL of a migrated database that holds only what the migrations wrote."""
        while self._free:
            name = self._free.pop()
            if self._emptied(name):
                return f"{self.base}/{name}"
            self._drop(name)
        name = f"tb_test_{uuid.uuid4().hex[:12]}"
        self.copy_template(name)
        self._made.append(name)
        return f"{self.base}/{name}"

    def made(self, url: str) -> bool:
        """Whether url is one of this pool's databases (at the newest schema since `take`)."""
        return url.startswith(self.base + "/") and url.rsplit("/", 1)[1] in self._made

    def give_back(self, url: str) -> None:
        """The test is done with the database at url: the next `take` may hand it out."""
        self._free.append(url.rsplit("/", 1)[1])

    def copy_template(self, name: str, tablespace: str = "pg_default") -> None:
        """Make database `name` a copy of the template, with a deployment id of its own."""
        self._admin(
            f'CREATE DATABASE "{name}" TEMPLATE "{self.template()}" TABLESPACE "{tablespace}"'
        )
        engine = sa.create_engine(f"{self.base}/{name}")
        with engine.begin() as connection:
            _new_deployment_id(connection)
        engine.dispose()

    def close(self) -> None:
        """Drop every database this pool made, and the template."""
        for name in list(self._made):
            self._drop(name)
        if self._template:
            self._drop(self._template)

    def _emptied(self, name: str) -> bool:
        """Empty the kept database `name`; False where its schema is not the template's."""
        engine = sa.create_engine(f"{self.base}/{name}")
        try:
            with engine.begin() as connection:
                connection.execute(  # connections the test left open would hold TRUNCATE back
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
                if connection.execute(sa.text(_SCHEMA)).scalar() != self._schema:
                    return False
                tables = ", ".join(f'"{table}"' for table in self._tables)
                connection.execute(sa.text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
                _new_deployment_id(connection)
            return True
        finally:
            engine.dispose()

    def _drop(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._made:
            self._made.remove(name)


def _new_deployment_id(connection: sa.Connection) -> None:
    connection.execute(sa.text("UPDATE deployment SET id = :id"), {"id": uuid.uuid4().hex})
