"""Structured, single-line logs: `event key=value …`. Never pass message content, keys or
tokens as fields."""

from __future__ import annotations

import logging
import re
import sys

# Third-party lines can carry credentials (uvicorn logs the WebSocket URL, `?token=` and all).
SECRETS = re.compile(r"(?i)(token=|bearer\s+|api[_-]?key=)[^\s&\"']+")


class RedactSecrets(logging.Filter):
    """Replaces credentials in any record's final message with `***`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = SECRETS.sub(r"\1***", message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def configure(service: str, level: str = "INFO") -> None:
    """One line per record on stderr at `level` (MUSTER_LOG_LEVEL, `Settings.log_level`)."""
    level = level.upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {service} %(name)s %(message)s"))
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiokafka", "faststream", "uvicorn.access", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
