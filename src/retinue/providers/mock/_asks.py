"""What a request asks of the reply, read from each wire format: tool choice, parallel calls, a limit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

__all__ = ["ToolChoice", "output_limit", "parallel_calls", "tool_choice", "whole_number"]

ToolChoice: TypeAlias = tuple[Literal["auto", "none", "required"], tuple[str, ...] | None]
"""Whether the reply may, must not or must call a tool, and the names it may call from
(``None``: any offered): a forced tool is ``("required", (name,))``."""

_MODES: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto",
    "none": "none",
    "required": "required",
    "any": "required",  # Anthropic's name for it
}


def tool_choice(api: str, body: Mapping[str, object]) -> ToolChoice:
    """The request's ``tool_choice``, as the three wire formats send it.

    A string mode (OpenAI), ``{"type": ...}`` (Anthropic, with ``tool`` and a
    name), a named function (OpenAI), or ``allowed_tools`` (OpenAI: a mode and
    the functions allowed). Anything else leaves the choice to the model.
    """
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        return _mode(choice), None
    if not isinstance(choice, dict):
        return "auto", None
    kind = choice.get("type")
    if api == "messages":
        name = choice.get("name")
        if kind == "tool" and isinstance(name, str):
            return "required", (name,)
        return _mode(kind), None
    if kind == "function":
        name = _function_name(choice)
        return ("required", (name,)) if name is not None else ("auto", None)
    if kind == "allowed_tools":
        # Chat nests the mode and the tools one level down; Responses does not.
        allowed = choice.get("allowed_tools", choice)
        if isinstance(allowed, dict) and isinstance(tools := allowed.get("tools"), list):
            names = tuple(n for tool in tools if (n := _function_name(tool)) is not None)
            return _mode(allowed.get("mode")), names
    return "auto", None


def _mode(value: object) -> Literal["auto", "none", "required"]:
    """The mode *value* names; ``auto`` for any other value (an object or a list too,
    which a lookup would refuse as unhashable)."""
    return _MODES.get(value, "auto") if isinstance(value, str) else "auto"


def _function_name(tool: object) -> str | None:
    """The name of a function tool or choice: ``{"function": {"name"}}`` or ``{"name"}``."""
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return name if isinstance(name, str) else None


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
        value = whole_number(body.get(field))
        if value is not None and value > 0:
            return value
    return None


def whole_number(value: object) -> int | None:
    """*value* as the integer JSON wrote, an integral number (``64.0``) included; else ``None``.

    A bool is no number here, though Python counts it an int.
    """
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None
