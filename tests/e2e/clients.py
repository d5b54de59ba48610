"""Per-test WebSocket and REST clients for alice and bob on the shared cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .wsclient import Client, Rest


@pytest.fixture
async def alice(cluster) -> AsyncIterator[Client]:  # type: ignore[no-untyped-def]
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    yield client
    await client.close()


@pytest.fixture
async def bob(cluster) -> AsyncIterator[Client]:  # type: ignore[no-untyped-def]
    client = await Client.connect(cluster.ws_url, cluster.tokens["bob"])
    yield client
    await client.close()


@pytest.fixture
async def alice_rest(cluster) -> AsyncIterator[Rest]:  # type: ignore[no-untyped-def]
    rest = Rest(cluster.gateway_url, cluster.tokens["alice"])
    yield rest
    await rest.close()


@pytest.fixture
async def bob_rest(cluster) -> AsyncIterator[Rest]:  # type: ignore[no-untyped-def]
    rest = Rest(cluster.gateway_url, cluster.tokens["bob"])
    yield rest
    await rest.close()
