"""Medians over repeated passes: each figure is the median of that figure over the passes."""

from __future__ import annotations

import statistics
from typing import Any


def median_of(values: list[Any]) -> Any:
    """The element-wise median of equally shaped JSON values (dicts recurse, numbers median,
    anything else is taken from the first pass)."""
    first = values[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(v, dict) and k in v for v in values)]
        return {k: median_of([v[k] for v in values]) for k in keys}
    if isinstance(first, bool) or not isinstance(first, int | float) or all(v == first for v in values):
        return first  # identities (c, n, k) stay as they are, also for an even number of passes
    nums = [v for v in values if isinstance(v, int | float)]
    m = statistics.median(nums)
    return round(m, 5) if isinstance(m, float) else m


def median_runs(passes: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One run per concurrency, the median over the passes, in the order of the first pass."""
    out = []
    for run in passes[0]:
        same_c = [r for p in passes for r in p if r["c"] == run["c"]]
        out.append(median_of(same_c))
    return out
