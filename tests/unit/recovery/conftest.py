"""Database tests of the recovery service share the gateway tests' fresh migrated database
fixtures (a database of their own, on the same server); `ports` runs a test on recovery's
two ports in memory, then on a fresh PostgreSQL database."""

from tests.unit.gateway.conftest import database_url, pool  # noqa: F401
from tests.unit.recovery.ports import ports  # noqa: F401
