"""Every message type that crosses a process boundary in muster."""

# `events` registers `session_events` (which builds on it) at its end: loading it first
# makes either import order work.
from muster_contracts import events as _events  # noqa: F401
