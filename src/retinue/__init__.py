"""retinue: an actor-model runtime for LLM agents on trio.

Open a runtime, create agents, talk to them::

    async with retinue.open_runtime(models=model, tools=[lookup]) as rt:
        agent = await rt.create_agent("writer", retinue.AgentOptions(model="m"))
        result = await agent.ask("hello")
"""

from __future__ import annotations

from ._content import (
    HookContext as HookContext,
    Message as Message,
    MessageSource as MessageSource,
    Reasoning as Reasoning,
    Text as Text,
    ToolCall as ToolCall,
    ToolResultBlock as ToolResultBlock,
)
from ._errors import (
    AgentDisposedError as AgentDisposedError,
    ConfigError as ConfigError,
    ModelError as ModelError,
    RetinueError as RetinueError,
    SessionError as SessionError,
    StoreError as StoreError,
    ToolError as ToolError,
)
from .actors import Agent as Agent, AgentOptions as AgentOptions, TurnResult as TurnResult
from .hooks import (
    Accept as Accept,
    Allow as Allow,
    Ask as Ask,
    Block as Block,
    Continue as Continue,
    Deny as Deny,
    Stop as Stop,
)
from .providers import Model as Model, ModelRouter as ModelRouter
from .session import Session as Session
from .stores import MemoryStore as MemoryStore, SessionStore as SessionStore
from .supervisors import RestartPolicy as RestartPolicy, Runtime as Runtime, open_runtime as open_runtime
from .tools import Tool as Tool, ToolRegistry as ToolRegistry, tool as tool

__all__ = [
    "Accept",
    "Agent",
    "AgentDisposedError",
    "AgentOptions",
    "Allow",
    "Ask",
    "Block",
    "ConfigError",
    "Continue",
    "Deny",
    "HookContext",
    "MemoryStore",
    "Message",
    "MessageSource",
    "Model",
    "ModelError",
    "ModelRouter",
    "Reasoning",
    "RestartPolicy",
    "RetinueError",
    "Runtime",
    "Session",
    "SessionError",
    "SessionStore",
    "Stop",
    "StoreError",
    "Text",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolRegistry",
    "ToolResultBlock",
    "TurnResult",
    "open_runtime",
    "tool",
]
