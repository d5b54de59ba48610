"""`work`, the unit-of-work fixture the contract suites share (both implementations)."""

from tests.unit.runtime.uow_harness import work  # noqa: F401
