"""`work`, the unit-of-work fixture the contract suites share (both implementations), and
`spans`, tracing into memory."""

from tests.unit.runtime.spans import spans  # noqa: F401
from tests.unit.runtime.uow_harness import work  # noqa: F401
