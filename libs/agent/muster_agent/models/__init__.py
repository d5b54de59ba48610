"""Model providers: the scripted model for tests and local runs, OpenAI-compatible APIs."""

from __future__ import annotations

from muster_runtime.process.settings import Settings

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


def build_model(name: str, settings: Settings | None = None) -> ModelProvider:
    """The provider selected by MUSTER_MODEL ("script" or "openai"), configured by
    `settings` (by default, this process's environment)."""
    kind = name.strip().lower()
    if kind not in ("script", "openai"):
        raise ValueError(f"unknown model provider {name!r}; expected 'script' or 'openai'")
    settings = settings or Settings.from_env()
    if kind == "script":
        return ScriptedModel(settings.script_summary_delay_ms)
    # Imported here so processes on the scripted model never load the OpenAI SDK.
    from muster_agent.models.endpoint import NamingEndpoint, public_url
    from muster_agent.models.openai_provider import OpenAIModel

    retries = settings.model_max_retries
    model = OpenAIModel.from_settings(settings, max_retries=retries)
    return NamingEndpoint(model, public_url(settings.openai_base_url), retries)
