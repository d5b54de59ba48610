"""Schema migrations (Alembic), callable from the launcher and tests: `upgrade(url)`."""

from __future__ import annotations

import sys
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
# The database's functions: the current definition of each in `sql/<name>.sql`, and in
# `sql/versions/<revision>_<name>.sql` the exact text each migration installed.
SQL = Path(__file__).parent / "sql"
SQL_VERSIONS = SQL / "versions"


def sqlalchemy_url(database_url: str) -> str:
    """asyncpg DSN (`postgresql://…`) → SQLAlchemy URL with the asyncpg driver."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+asyncpg://" + database_url[len(prefix) :]
    raise ValueError("DATABASE_URL must start with postgresql://")


def run_script(script: str) -> None:
    """Inside a migration: run a multi-statement SQL script. asyncpg prepares each statement,
    so the script is sent one statement at a time."""
    from alembic import op

    for statement in (part.strip() for part in script.split(";\n")):
        if statement:
            op.execute(statement)


def install(*file_names: str) -> None:
    """Inside a migration: run the versioned definitions it installs, each a file of
    `sql/versions/` read as written (one function or type per file, never assembled from
    another migration's text, so the text a revision installs can be opened and never
    changes when a later revision does)."""
    from alembic import op

    for file_name in file_names:
        op.execute((SQL_VERSIONS / file_name).read_text(encoding="utf-8"))


def upgrade(database_url: str, revision: str = "head") -> None:
    """Synchronous: Alembic's env runs its own event loop, so call this outside one."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    command.upgrade(config, revision)


if __name__ == "__main__":
    from muster_runtime.process.settings import Settings

    given = sys.argv[1] if len(sys.argv) > 1 else Settings.from_env().database_url
    if not given:
        raise SystemExit("usage: python -m muster_runtime.store.migrate DATABASE_URL (or set DATABASE_URL)")
    upgrade(given)
