"""Tools: definitions, the ``@tool`` decorator and the never-raising execution pipeline."""

from __future__ import annotations

from retinue._handle import AgentHandle

from ._decorator import tool
from ._execution import PreparedCall, ToolExecution, ToolExecutionResult
from ._registry import ToolRegistry
from ._tool import ExecutionMode, Tool, ToolContext, ToolOutput

__all__ = [
    "AgentHandle",
    "ExecutionMode",
    "PreparedCall",
    "Tool",
    "ToolContext",
    "ToolExecution",
    "ToolExecutionResult",
    "ToolOutput",
    "ToolRegistry",
    "tool",
]
