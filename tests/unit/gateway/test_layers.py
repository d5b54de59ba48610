"""Where the gateway's SQL may live: its decisions speak only to the unit of work, its
handlers only to the unit of work and the read port (ADR 0033). A module that broke the
rule (an `asyncpg` import, `PostgresUnitOfWork`, `uow.connection()`, a SQL string) fails
here before it can make a decision that the in-memory unit of work cannot run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import muster_gateway
import pytest
from muster_agent import answers

PACKAGE = Path(muster_gateway.__file__).parent
ANSWERS = Path(answers.__file__ or "")
DECISIONS = ["commands.py", "management.py", "side_sessions.py", "deciding.py", "limits.py", "overload.py"]
HANDLERS = [
    "rest.py",
    "rest_sessions.py",
    "rest_waits.py",
    "ws.py",
    "ws_waits.py",
    "local_tools.py",
    "metrics.py",
]
# What only the composition root and the PostgreSQL adapters may import.
STORAGE = ("asyncpg", "muster_runtime.process.db", "muster_runtime.uow.postgres_uow")
# The gateway's modules that hold SQL: only the read adapter (and the root) import them.
SQL_MODULES = {
    "queries",
    "tree_queries",
    "wait_queries",
    "streams",
    "file_changes",
    "recovery_queries",
    "overload_queries",
    "postgres_reads",
}
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b.*\b(FROM|INTO|SET|WHERE)\b", re.S)


def imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def problems(path: Path, *, handler: bool) -> list[str]:
    tree = ast.parse(path.read_text())
    found = [name for name in imported(tree) if name.startswith(STORAGE)]
    found += [
        f"SQL {node.value[:40]!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value)
    ]
    found += [
        "connection()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "connection"
    ]
    if handler:
        found += [
            name
            for name in imported(tree)
            if name.startswith("muster_gateway.") and name.split(".")[1] in SQL_MODULES
        ]
    return found


@pytest.mark.parametrize("name", DECISIONS)
def test_a_decision_speaks_only_to_the_unit_of_work(name: str) -> None:
    assert problems(PACKAGE / name, handler=True) == []


def test_the_answers_speak_only_to_the_unit_of_work() -> None:
    assert problems(ANSWERS, handler=True) == []


@pytest.mark.parametrize("name", HANDLERS)
def test_a_handler_reads_through_the_port(name: str) -> None:
    assert problems(PACKAGE / name, handler=True) == []


def test_the_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import asyncpg\nfrom muster_gateway import queries\n"
        "Q = 'SELECT 1 FROM sessions WHERE x'\nasync def f(uow):\n    await uow.connection()\n"
    )
    assert problems(bad, handler=True) == [
        "asyncpg", "SQL 'SELECT 1 FROM sessions WHERE x'", "connection()", "muster_gateway.queries"]  # fmt: skip
