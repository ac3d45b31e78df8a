"""What a request asks of the reply, read from each wire format: tool choice, parallel calls, a limit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

__all__ = ["ToolChoice", "output_limit", "parallel_calls", "tool_choice"]

ToolChoice: TypeAlias = tuple[Literal["auto", "none", "required", "tool"], str | None]
"""How the reply may call tools, and the one tool's name when it must call that one."""

_MODES: dict[object, Literal["auto", "none", "required"]] = {
    "auto": "auto",
    "none": "none",
    "required": "required",
    "any": "required",  # Anthropic's name for it
}


def tool_choice(api: str, body: Mapping[str, object]) -> ToolChoice:
    """The request's ``tool_choice``: Chat's and Responses' strings or a named function,
    Anthropic's ``{"type": ...}``; anything else leaves the choice to the model."""
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        return _MODES.get(choice, "auto"), None
    if not isinstance(choice, dict):
        return "auto", None
    kind = choice.get("type")
    if api == "messages":
        if kind == "tool" and isinstance(name := choice.get("name"), str):
            return "tool", name
        return _MODES.get(kind, "auto"), None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    if kind == "function" and isinstance(name, str):
        return "tool", name
    return "auto", None


def parallel_calls(api: str, body: Mapping[str, object]) -> bool:
    """Whether the reply may call several tools: ``parallel_tool_calls`` (OpenAI), or not
    ``tool_choice.disable_parallel_tool_use`` (Anthropic)."""
    if api == "messages":
        choice = body.get("tool_choice")
        return not (isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True)
    return body.get("parallel_tool_calls") is not False


def output_limit(api: str, body: Mapping[str, object]) -> int | None:
    """The most output tokens the request allows, if it says."""
    fields = {
        "chat": ("max_completion_tokens", "max_tokens"),
        "responses": ("max_output_tokens",),
        "messages": ("max_tokens",),
    }[api]
    for field in fields:
        value = body.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
