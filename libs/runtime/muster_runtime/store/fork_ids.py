"""Ids of a fork's copies: derived from the side task and the original, so replaying a
`SessionForked` event gives the same rows. The projector computes them in SQL
(`muster_copied_id`, migration 0010); this is the same function for Python readers."""

from __future__ import annotations

import hashlib
from uuid import UUID


def copied_id(side_session_id: UUID, original_id: UUID) -> UUID:
    return UUID(hashlib.md5(f"{side_session_id}:{original_id}".encode()).hexdigest())
