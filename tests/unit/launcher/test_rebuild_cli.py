"""`muster rebuild`: finding the database, the exit statuses and what it prints."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from muster_launcher import cli
from muster_launcher.rebuild_cli import CannotRun, database_url, redacted, run_rebuild
from muster_runtime.process.db import create_pool

from tests.unit.runtime.test_rebuild_db import delegated_turn, fresh_database_url


def pid_file(data_dir: Path, pid: int, port: int) -> None:
    (data_dir / "postgres").mkdir(parents=True)
    lines = [str(pid), str(data_dir / "postgres"), "1700000000", str(port), "", "127.0.0.1", "0", "ready"]
    (data_dir / "postgres" / "postmaster.pid").write_text("\n".join(lines) + "\n")


def test_database_url_comes_from_the_environment_first(tmp_path: Path) -> None:
    assert database_url({"DATABASE_URL": "postgresql://u:p@h/db", "MUSTER_DATA_DIR": str(tmp_path)}) == (
        "postgresql://u:p@h/db")
    assert redacted("postgresql://u:secret@h:5/db") == "postgresql://u:***@h:5/db"


def test_the_local_database_is_found_through_its_postmaster_pid(tmp_path: Path) -> None:
    pid_file(tmp_path, os.getpid(), 54321)
    assert database_url({"MUSTER_DATA_DIR": str(tmp_path)}) == "postgresql://postgres@127.0.0.1:54321/muster"


def test_no_running_local_database_is_said_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CannotRun, match="not running"):
        database_url({"MUSTER_DATA_DIR": str(tmp_path)})
    assert run_rebuild(False, 100, {"MUSTER_DATA_DIR": str(tmp_path)}) == 2
    assert "muster rebuild: the local PostgreSQL" in capsys.readouterr().err
    pid_file(tmp_path, 2**22 + 12345, 54321)  # above any pid_max: certainly gone
    with pytest.raises(CannotRun, match="is gone"):
        database_url({"MUSTER_DATA_DIR": str(tmp_path)})


def test_an_unreachable_database_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_rebuild(True, 100, {"DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"}) == 2
    assert "muster rebuild --check: cannot connect" in capsys.readouterr().err


async def test_check_then_rebuild_print_their_tables(
    postgres_server_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fresh_database_url(postgres_server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=2)
        try:
            await delegated_turn(pool)
            monkeypatch.setenv("DATABASE_URL", url)
            assert await asyncio.to_thread(cli.main, ["rebuild", "--check"]) == 0
            out = capsys.readouterr().out.splitlines()
            assert out[0].split() == ["table", "rows_live", "rows_rebuilt", "checksum_live", "checksum_rebuilt", "status"]
            assert [line.split()[-1] for line in out[1:7]] == ["equal"] * 6

            await pool.execute("UPDATE messages SET content = 'x' WHERE role = 'TOOL'")
            assert await asyncio.to_thread(cli.main, ["rebuild", "--check"]) == 1
            out = "\n".join(capsys.readouterr().out.splitlines())
            assert "messages: rows differing (primary key): " in out
            assert sorted(line.split()[-1] for line in out.splitlines()[1:7]) == ["different"] + ["equal"] * 5

            assert await asyncio.to_thread(cli.main, ["rebuild", "--batch", "5"]) == 0
            out = capsys.readouterr().out
            assert "events/s: " in out and "\nmessages  " in out
            assert await asyncio.to_thread(cli.main, ["rebuild", "--check"]) == 0
        finally:
            await pool.close()
