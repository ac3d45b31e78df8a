"""retinue: an actor-model runtime for LLM agents on trio.

Open a runtime, create agents, talk to them::

    async with retinue.open_runtime(models=model, tools=[lookup]) as rt:
        agent = await rt.create_agent("writer", retinue.AgentOptions(model="m"))
        result = await agent.ask("hello")
"""

from __future__ import annotations

from ._content import (
    Message as Message,
    Reasoning as Reasoning,
    Text as Text,
    ToolCall as ToolCall,
    ToolResultBlock as ToolResultBlock,
)
from ._errors import (
    AgentDisposedError as AgentDisposedError,
    AgentError as AgentError,
    ConfigError as ConfigError,
    ModelError as ModelError,
    RetinueError as RetinueError,
    SessionError as SessionError,
    StoreError as StoreError,
    ToolError as ToolError,
)
from ._sources import HookContext as HookContext, MessageSource as MessageSource
from .actors import (
    Agent as Agent,
    AgentOptions as AgentOptions,
    SubscriptionOverflowError as SubscriptionOverflowError,
    TurnResult as TurnResult,
)
from .config import LoopConfig as LoopConfig, load_config as load_config
from .hooks import (
    Accept as Accept,
    Allow as Allow,
    Ask as Ask,
    Block as Block,
    Continue as Continue,
    Deny as Deny,
    Stop as Stop,
)
from .providers import (
    AdmissionController as AdmissionController,
    AdmissionLimits as AdmissionLimits,
    Model as Model,
    ModelRouter as ModelRouter,
    RetryPolicy as RetryPolicy,
)
from .session import Session as Session
from .stores import (
    JSONLStore as JSONLStore,
    MemoryStore as MemoryStore,
    PostgresStore as PostgresStore,
    SessionStore as SessionStore,
    SQLiteStore as SQLiteStore,
)
from .supervisors import (
    RestartPolicy as RestartPolicy,
    Runtime as Runtime,
    open_runtime as open_runtime,
)
from .tools import Tool as Tool, ToolRegistry as ToolRegistry, tool as tool

__all__ = [
    "Accept",
    "AdmissionController",
    "AdmissionLimits",
    "Agent",
    "AgentDisposedError",
    "AgentError",
    "AgentOptions",
    "Allow",
    "Ask",
    "Block",
    "ConfigError",
    "Continue",
    "Deny",
    "HookContext",
    "JSONLStore",
    "LoopConfig",
    "MemoryStore",
    "Message",
    "MessageSource",
    "Model",
    "ModelError",
    "ModelRouter",
    "PostgresStore",
    "Reasoning",
    "RestartPolicy",
    "RetinueError",
    "RetryPolicy",
    "Runtime",
    "SQLiteStore",
    "Session",
    "SessionError",
    "SessionStore",
    "Stop",
    "StoreError",
    "SubscriptionOverflowError",
    "Text",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolRegistry",
    "ToolResultBlock",
    "TurnResult",
    "load_config",
    "open_runtime",
    "tool",
]
