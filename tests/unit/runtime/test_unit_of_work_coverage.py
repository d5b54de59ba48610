"""Every operation of the unit of work is run on both implementations by the contract
suite: an operation added to `AbstractUnitOfWork` without a contract test fails here."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from tests.unit.runtime import uow_contract
from tests.unit.runtime.uow_contract import COVERED, calls, operations

SUITE = sorted(p.stem for p in Path(__file__).parent.glob("test_*_contract.py"))


def _load_suite() -> None:
    for module in SUITE:
        importlib.import_module(f"tests.unit.runtime.{module}")


def test_every_operation_has_a_contract_test_on_both_implementations() -> None:
    _load_suite()
    missing = sorted(operations() - set(COVERED))
    assert not missing, f"operations of the unit of work without a contract test (@covers): {missing}"


def test_each_covering_test_runs_on_both_and_calls_what_it_names() -> None:
    _load_suite()
    unknown = sorted(set(COVERED) - operations())
    assert not unknown, f"@covers names no operation of AbstractUnitOfWork: {unknown}"
    for name, tests in COVERED.items():
        for test in tests:
            where = f"{test.__module__}.{test.__name__}"
            assert "work" in inspect.signature(test).parameters, f"{where} does not run on both (`work`)"
            assert calls(test, name), f"{where} names {name} but does not call it"


def test_the_suite_is_where_the_registry_looks() -> None:
    assert {"test_unit_of_work_contract", "test_unit_of_work_reads_contract"} <= set(SUITE)
    assert uow_contract.operations() >= {"append", "lock_session", "session_state"}
