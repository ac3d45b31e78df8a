"""The ReAct driver: turns, steps, the block assembler and the parallel tool scheduler."""

from __future__ import annotations

from ._assembler import BlockAssembler
from ._core import (
    DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    AgentCore,
    AgentStatus,
    LoopServices,
    StepSignal,
    TurnResult,
    check_parallel_cap,
    resolve_source,
)
from ._crash import answer_crashed, crash_reason
from ._driver import run_flusher, run_loop
from ._scheduler import parse_arguments
from ._step import header_event
from ._summary import summarize_turn

__all__ = [
    "DEFAULT_MAX_PARALLEL_TOOL_CALLS",
    "AgentCore",
    "AgentStatus",
    "BlockAssembler",
    "LoopServices",
    "StepSignal",
    "TurnResult",
    "answer_crashed",
    "check_parallel_cap",
    "crash_reason",
    "header_event",
    "parse_arguments",
    "resolve_source",
    "run_flusher",
    "run_loop",
    "summarize_turn",
]
