"""`work`, the unit-of-work fixture the contract suites share (both implementations),
`spans`, tracing into memory, and `bells_dir`, a directory for fetch bells."""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.runtime.spans import spans  # noqa: F401
from tests.unit.runtime.uow_harness import work  # noqa: F401


@pytest.fixture
def bells_dir() -> Iterator[Path]:
    # Short: an AF_UNIX address holds 107 bytes, and pytest's tmp paths can be long.
    directory = Path(tempfile.mkdtemp(prefix="bells-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
