"""Database tests of the subagent worker share the gateway tests' fresh migrated database
fixtures (a database of their own, on the same server)."""

from tests.unit.gateway.conftest import database_url, pool  # noqa: F401
