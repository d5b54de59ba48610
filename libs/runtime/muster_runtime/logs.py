"""Structured, single-line logs: `event key=value …`. Never pass message content, keys or
tokens as fields."""

from __future__ import annotations

import logging
import os
import sys


def configure(service: str) -> None:
    level = os.environ.get("MUSTER_LOG_LEVEL", "INFO").upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {service} %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiokafka", "faststream", "uvicorn.access", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
