"""Processed-message tracking: a consumer records each message id in the same transaction
as the message's effect, so a redelivered message changes nothing."""

from __future__ import annotations

from muster_runtime.process.db import Connection


async def first_delivery(conn: Connection, consumer: str, message_id: str) -> bool:
    """True the first time `(consumer, message_id)` is seen in a committed transaction.

    The primary key decides (concurrent duplicates block, then see the conflict), so this
    is safe across instances; call it inside the transaction that applies the effect.
    """
    inserted = await conn.fetchval(
        """INSERT INTO processed_messages (consumer, message_id) VALUES ($1, $2)
           ON CONFLICT DO NOTHING RETURNING true""",
        consumer,
        message_id,
    )
    return bool(inserted)
