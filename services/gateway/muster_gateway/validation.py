"""Validation errors → one human line that names each offending field, shared by the
WebSocket (`data.content: field required`) and REST (`rounds: must be >= 1`) edges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

_MESSAGES = {
    "missing": "field required",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "bool_parsing": "must be a boolean",
    "extra_forbidden": "unknown field",
    "string_too_short": "must not be empty",
    "string_unicode": "must not contain unpaired surrogates",
}
# Pydantic reports a union error once per branch, under `field.<branch>`.
_UNION_BRANCHES = {"str", "int", "none", "constrained-str", "constrained-int"}


def describe(exc: ValidationError, prefix: str = "") -> str:
    """`data.content: field required; id: must be a string or an integer`."""
    return describe_errors(exc.errors(include_url=False), prefix)


def describe_errors(errors: Iterable[Mapping[str, Any]], prefix: str = "", skip: int = 0) -> str:
    """`skip` drops leading loc parts, e.g. FastAPI's `query` / `path`."""
    reasons: dict[str, list[str]] = {}
    for err in errors:
        loc = [str(p) for p in list(err.get("loc", ()))[skip:] if not _is_branch(p)]
        field = prefix + ".".join(loc) if loc else prefix.rstrip(".") or "request"
        text = _reason(str(err.get("type")), err.get("ctx") or {}, str(err.get("msg", "")))
        if text not in reasons.setdefault(field, []):
            reasons[field].append(text)
    return "; ".join(f"{field}: {_join(texts)}" for field, texts in reasons.items())


def _is_branch(part: Any) -> bool:
    return isinstance(part, str) and (part in _UNION_BRANCHES or "[" in part)


def _reason(kind: str, ctx: Mapping[str, Any], fallback: str) -> str:
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if kind == "value_error" and ctx.get("error") is not None:
        return str(ctx["error"])
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    return fallback[:1].lower() + fallback[1:]


def _join(texts: list[str]) -> str:
    """["must be a string", "must be an integer"] → "must be a string or an integer"."""
    if len(texts) > 1 and all(t.startswith("must be ") for t in texts):
        return "must be " + " or ".join(t.removeprefix("must be ") for t in texts)
    return "; ".join(texts)
