"""`python -m muster_launcher.provision`: migrate the database and create the topics of an
existing deployment (DATABASE_URL, KAFKA_BOOTSTRAP_SERVERS), then exit. Idempotent."""

from __future__ import annotations

import asyncio
import sys

from muster_runtime.process.settings import Settings
from muster_runtime.store.migrate import upgrade

from muster_launcher.topics import ensure_topics


def main() -> int:
    settings = Settings.from_env()
    database_url, bootstrap = settings.database_url, settings.kafka_bootstrap_servers
    if not database_url or not bootstrap:
        print("provision: DATABASE_URL and KAFKA_BOOTSTRAP_SERVERS must be set", file=sys.stderr)
        return 2
    upgrade(database_url)
    created = asyncio.run(ensure_topics(bootstrap, settings, within=120.0))
    print(f"provision: database migrated; topics created: {', '.join(created) or 'none (all existed)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
