"""Every message type that crosses a process boundary in muster."""
