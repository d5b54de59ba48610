"""Which contract test covers which operation of the unit of work: each test of the
contract suite names the operations it exercises (`@covers("append", ...)`), and
`test_unit_of_work_coverage.py` fails when an operation of `AbstractUnitOfWork` has no
test naming it, when a test names an operation that does not exist or that it does not
call, or when a covering test does not run on both implementations (the `work` fixture)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

Test = TypeVar("Test", bound=Callable[..., Any])

COVERED: dict[str, list[Callable[..., Any]]] = {}


def operations() -> set[str]:
    """The public operations of the unit of work: every abstract method but the
    transaction's own (`_begin`, `_commit`, `_rollback`, run by `async with`)."""
    return {name for name in AbstractUnitOfWork.__abstractmethods__ if not name.startswith("_")}


def covers(*names: str) -> Callable[[Test], Test]:
    def register(test: Test) -> Test:
        for name in names:
            COVERED.setdefault(name, []).append(test)
        return test

    return register


def calls(test: Callable[..., Any], name: str) -> bool:
    """Whether the test's own text calls the operation (helpers do not count: a test
    names what it checks, not what its setup happens to use)."""
    return f".{name}(" in inspect.getsource(test)
