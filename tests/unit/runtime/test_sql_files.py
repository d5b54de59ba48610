"""The SQL in the source tree, without a database: migrations install versioned files and
never assemble SQL from another migration's text; each current file is the version the
latest migration of its name installed (ADR 0031)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from muster_runtime.store import migrate
from muster_runtime.store.migrate import MIGRATIONS, SQL_VERSIONS

from tests.unit.runtime.sql_text import current_definitions, normalised, versioned_definitions

MODULES = sorted((MIGRATIONS / "versions").glob("*.py"))
# String surgery that assembled a function from an earlier migration's text.
SPLICING_METHODS = {"replace", "partition", "rpartition", "format", "index", "rindex"}
DEFINITIONS = ("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", "CREATE TYPE", "CREATE TRIGGER",
               "CREATE VIEW", "CREATE OR REPLACE VIEW")


def _installs(module: Path, step: str) -> list[str]:
    """The file names that `step` (upgrade or downgrade) of a migration passes to `install`."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    [function] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == step]
    return [
        arg.value
        for call in ast.walk(function)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "install"
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    ]


@pytest.mark.parametrize("module", MODULES, ids=lambda path: path.stem)
def test_no_migration_splices_sql(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        where = f"{module.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in SPLICING_METHODS, f"{where}: .{node.func.attr}() on SQL text"
        assert not isinstance(node, ast.JoinedStr), f"{where}: an f-string builds SQL"
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            assert not any("importlib" in n or n == "migration_module" for n in names), f"{where}: imports a migration"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.upper()
            assert not any(d in text for d in DEFINITIONS), f"{where}: a definition belongs in sql/versions/"


def test_the_splicing_helper_is_gone() -> None:
    assert not hasattr(migrate, "migration_module")


def test_each_version_is_installed_by_its_own_revision_and_downgrades_reinstall_older_ones() -> None:
    files = {path.name for path in SQL_VERSIONS.glob("*.sql")}
    installed: set[str] = set()
    for module in MODULES:
        revision = module.name[:4]
        upgrade, downgrade = _installs(module, "upgrade"), _installs(module, "downgrade")
        assert all(name.startswith(revision + "_") for name in upgrade), f"{module.name} installs {upgrade}"
        assert all(name[:4] < revision for name in downgrade), f"{module.name} downgrades to {downgrade}"
        assert set(upgrade + downgrade) <= files, f"{module.name}: missing {set(upgrade + downgrade) - files}"
        installed |= set(upgrade)
    assert installed == files, f"versions no migration installs: {sorted(files - installed)}"


def test_each_version_creates_the_object_of_its_file_name() -> None:
    for version in versioned_definitions():
        assert version.path.stem == f"{version.path.stem[:4]}_{version.name}", version.path.name


def test_each_current_file_is_the_latest_version_of_its_name() -> None:
    """An edit of `sql/<name>.sql` needs a migration installing it as a new version."""
    latest = {version.name: version for version in versioned_definitions()}  # oldest first
    current = current_definitions()
    assert current.keys() <= latest.keys(), f"never installed: {sorted(current.keys() - latest.keys())}"
    for name, definition in current.items():
        assert normalised(definition.text) == normalised(latest[name].text), (
            f"sql/{name}.sql differs from {latest[name].path.name}: add a migration that installs it"
        )


def test_comparison_ignores_comments_and_layout_but_not_code_or_literals() -> None:
    body = "SELECT a, 'it''s -- kept'  -- a comment's apostrophe\nFROM t WHERE x = ( 1 );"
    assert normalised(body) == normalised("SELECT a,'it''s -- kept' FROM t\n  WHERE x = (1);")
    assert normalised(body) != normalised("SELECT a, 'it''s -- kept' FROM t WHERE x = (2);")
    assert normalised(body) != normalised("SELECT a, 'its -- kept' FROM t WHERE x = (1);")
    assert normalised(body) != normalised("SELECT a, 'it''s -- kept' FROM t WHERE x =(1) AND y;")
