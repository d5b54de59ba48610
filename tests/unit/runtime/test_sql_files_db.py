"""After `alembic upgrade head` on a fresh database, the database's functions and types are
exactly the files of `store/sql/` (ADR 0031): each file, created in a scratch schema, has
the live definition's arguments, result, language, volatility and settings, and its body
but for comments and layout; and every function and type of the schema has its file."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.databases import fresh_database_url
from tests.unit.runtime.sql_text import current_definitions, normalised

SCRATCH = "muster_file_check"
# Functions of the schema, not of an extension (none today; a future one brings its own).
FUNCTIONS = """
SELECT p.proname::text AS name, count(*) OVER (PARTITION BY p.proname) AS overloads,
       pg_get_functiondef(p.oid) AS definition
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
"""
# Composite types of their own (not a table's row type), with their fields in order.
TYPES = """
SELECT t.typname::text AS name,
       array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS fields
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = $1
GROUP BY t.typname
"""
# pg_get_functiondef: the header PostgreSQL prints (name, arguments, result, language,
# volatility, settings), then the body between dollar quotes.
HEADER_AND_BODY = re.compile(r"^(.*?\n)AS (\$\w*\$)(.*)\2\s*$", re.DOTALL)


@pytest.fixture(scope="module")
async def conn(postgres_server_url: str) -> AsyncIterator[asyncpg.Connection]:
    async with fresh_database_url(postgres_server_url, "sql_files") as url:
        connection = await asyncpg.connect(url)
        try:
            yield connection
        finally:
            await connection.close()


def _split(schema: str, definition: str) -> tuple[str, str]:
    match = HEADER_AND_BODY.match(definition)
    assert match is not None, definition[:200]
    header = match.group(1).replace(f"FUNCTION {schema}.", "FUNCTION ", 1)
    return header, normalised(match.group(3))


async def _created_from_files(conn: asyncpg.Connection, kind: str, query: str) -> dict[str, asyncpg.Record]:
    """What the files of `kind` create in a scratch schema, read by `query`; rolled back.
    Functions are created beside the live types (so their arguments name the same ones),
    types apart from the functions."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute(f"CREATE SCHEMA {SCRATCH}; SET LOCAL search_path = {SCRATCH}, public")
        for found in current_definitions().values():
            if found.kind == kind:
                await conn.execute(found.text)
        return {row["name"]: row for row in await conn.fetch(query, SCRATCH)}
    finally:
        await transaction.rollback()


async def test_every_function_of_the_database_has_its_file_and_no_file_is_missing(conn: asyncpg.Connection) -> None:
    live = {row["name"] for row in await conn.fetch(FUNCTIONS, "public")}
    types = {row["name"] for row in await conn.fetch(TYPES, "public")}
    files = current_definitions()
    assert live == {name for name, d in files.items() if d.kind == "FUNCTION"}
    assert types == {name for name, d in files.items() if d.kind == "TYPE"}


async def test_each_function_is_defined_as_its_file(conn: asyncpg.Connection) -> None:
    from_files = await _created_from_files(conn, "FUNCTION", FUNCTIONS)
    await conn.execute(f"SET search_path = {SCRATCH}, public")  # the same names print the same way
    try:
        live = {row["name"]: row for row in await conn.fetch(FUNCTIONS, "public")}
    finally:
        await conn.execute("RESET search_path")
    assert from_files.keys() == live.keys()
    for name, row in live.items():
        assert row["overloads"] == 1, f"{name}: one definition per name, so one file per function"
        file_header, file_body = _split(SCRATCH, from_files[name]["definition"])
        live_header, live_body = _split("public", row["definition"])
        assert file_header == live_header, f"sql/{name}.sql: the signature or attributes differ"
        assert file_body == live_body, f"sql/{name}.sql: the body differs from the database's"


async def test_each_type_is_defined_as_its_file(conn: asyncpg.Connection) -> None:
    from_files = await _created_from_files(conn, "TYPE", TYPES)
    live = {row["name"]: row for row in await conn.fetch(TYPES, "public")}
    assert from_files.keys() == live.keys()
    for name, row in live.items():
        assert from_files[name]["fields"] == row["fields"], f"sql/{name}.sql: the fields differ"
