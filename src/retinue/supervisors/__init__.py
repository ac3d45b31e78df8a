"""The root supervisor: ``open_runtime``, the registry, restarts and configured agents."""

from __future__ import annotations

from ._configured import (
    CONFIG_START_FAILED,
    ConfigStartFailure,
    bind_parallel_cap,
    start_configured_agents,
)
from ._hooks import RuntimeHooks
from ._open import open_runtime
from ._registry import AgentRegistry
from ._runtime import Runtime
from ._supervise import RestartPolicy

__all__ = [
    "CONFIG_START_FAILED",
    "AgentRegistry",
    "ConfigStartFailure",
    "RestartPolicy",
    "Runtime",
    "RuntimeHooks",
    "bind_parallel_cap",
    "open_runtime",
    "start_configured_agents",
]
