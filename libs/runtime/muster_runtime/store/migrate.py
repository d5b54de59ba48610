"""Schema migrations (Alembic), callable from the launcher and tests: `upgrade(url)`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


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


def migration_module(file_name: str) -> ModuleType:
    """Inside a migration: an earlier revision's module (by its file name), for the SQL
    text a later revision extends (the projector function is spliced, not copied)."""
    source = MIGRATIONS / "versions" / file_name
    spec = importlib.util.spec_from_file_location(source.stem, source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
