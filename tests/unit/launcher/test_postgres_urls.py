"""The URLs of the embedded PostgreSQL: the services connect over its Unix socket when the
socket path fits an AF_UNIX address, people and tools over TCP."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from muster_launcher.postgres import postgres_url, services_url, socket_dir_of


def test_the_services_use_the_socket_in_the_data_dir(tmp_path: Path) -> None:
    url = services_url(tmp_path, 5544)
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    assert (parts.scheme, parts.path) == ("postgresql", "/muster")
    assert query["host"] == [str((tmp_path / "postgres").resolve())] == [socket_dir_of(tmp_path, 5544)]
    assert query["port"] == ["5544"]


def test_a_socket_path_too_long_for_af_unix_falls_back_to_tcp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    assert socket_dir_of(deep, 5544) == ""
    assert services_url(deep, 5544) == postgres_url(5544) == "postgresql://postgres@127.0.0.1:5544/muster"
