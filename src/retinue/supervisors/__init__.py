"""The root supervisor: ``open_runtime``, the agent registry and restart policy."""

from __future__ import annotations

from ._registry import AgentRegistry
from ._runtime import Runtime, open_runtime
from ._supervise import RestartPolicy

__all__ = ["AgentRegistry", "RestartPolicy", "Runtime", "open_runtime"]
