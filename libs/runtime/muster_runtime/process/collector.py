"""The cyclic garbage collector, tuned for long-running services.

Nearly everything a service allocates per message (records, rows, models, coroutines) is
freed by reference counting; the collector only finds cycles. With CPython's default
threshold (700 allocations) it ran hundreds of times a second under load, each young
collection walking every container created since the last, and each full one walking the
whole heap, modules and settings included: a few per cent of a service's CPU on this workload (perf).
`tune` freezes what startup created (the collector never walks it again) and collects the
young generation after `YOUNG_THRESHOLD` allocations instead of 700: a few megabytes of
cyclic garbage at most wait a little longer for their collection.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
# Older generations keep CPython's own ratios, so a full collection still comes.
OLDER_THRESHOLDS = (10, 10)


def tune() -> None:
    """Call once startup's imports and configuration are done, before serving."""
    gc.collect()  # what startup left unreachable is freed, not frozen
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
