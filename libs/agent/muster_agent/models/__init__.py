"""Model providers: the scripted model for tests and local runs, OpenAI-compatible APIs."""

from __future__ import annotations

import os

from muster_agent.models.base import (
    ModelError,
    ModelProvider,
    ModelReply,
    ModelRequest,
    ToolCall,
    Usage,
)
from muster_agent.models.scripted import ScriptedModel

__all__ = [
    "ModelError",
    "ModelProvider",
    "ModelReply",
    "ModelRequest",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "build_model",
]


def build_model(name: str) -> ModelProvider:
    """The provider selected by MUSTER_MODEL ("script" or "openai")."""
    kind = name.strip().lower()
    if kind == "script":
        return ScriptedModel(float(os.environ.get("MUSTER_SCRIPT_SUMMARY_DELAY_MS", "0") or 0))
    if kind == "openai":
        # Imported here so processes on the scripted model never load the OpenAI SDK.
        from muster_agent.models.openai_provider import OpenAIModel

        return OpenAIModel.from_env()
    raise ValueError(f"unknown model provider {name!r}; expected 'script' or 'openai'")
