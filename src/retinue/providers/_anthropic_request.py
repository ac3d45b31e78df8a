"""Anthropic Messages wire format: request bodies (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from retinue._lossless import FrozenDict, thaw_json
from retinue._request import ModelRequest, ToolSchema

from ._anthropic_history import anthropic_transcript
from ._extra_body import merge_extra_body
from ._failures import ProviderError
from ._replay import checked_tool_names

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MIN_THINKING_BUDGET",
    "anthropic_request_body",
    "anthropic_tools",
    "no_room_beside_thinking",
]

JsonObject = dict[str, object]
DEFAULT_MAX_TOKENS = 4096
MIN_THINKING_BUDGET = 1024
"""The smallest ``budget_tokens`` the API accepts for extended thinking."""


def anthropic_tools(tools: Sequence[ToolSchema]) -> list[JsonObject]:
    """Map tool schemas to Anthropic ``tools``."""
    return [
        {"name": t.name, "description": t.description, "input_schema": thaw_json(t.parameters)}
        for t in checked_tool_names(tools, "Anthropic Messages")
    ]


def _max_tokens(request: ModelRequest, default: int, thinking_budget: int | None) -> int:
    limit = default if request.max_tokens is None else request.max_tokens
    if thinking_budget is not None and limit <= thinking_budget:
        raise ProviderError(no_room_beside_thinking(limit, thinking_budget), code="INVALID_REQUEST")
    return limit


def _stop_sequences(stop: Sequence[str]) -> list[str]:
    """The stop sequences, all of them: the API refuses the request if one is blank.

    One is never dropped instead: the answer would then stop elsewhere than asked.
    """
    for sequence in stop:
        if not sequence.strip():
            raise ProviderError(
                f"the stop sequence {sequence!r} is empty or only whitespace, which "
                "the Anthropic Messages API refuses; the request was not sent",
                code="INVALID_REQUEST",
            )
    return list(stop)


def no_room_beside_thinking(limit: int, thinking_budget: int, name: str = "max_tokens") -> str:
    """Why a *limit* not above the thinking budget is refused, naming both values.

    Thinking tokens count toward ``max_tokens`` and the API refuses a limit
    not above the budget; raising the limit instead would spend more than the
    caller allowed and leave the answer only what thinking did not use.
    """
    return (
        f"{name} ({limit}) must be above the thinking budget ({thinking_budget}): thinking "
        f"tokens count toward max_tokens, so raise {name} or lower thinking_budget"
    )


def anthropic_request_body(
    request: ModelRequest,
    *,
    stream: bool = True,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
    thinking_budget: int | None = None,
    extra_body: FrozenDict | None = None,
) -> JsonObject:
    """Build the Messages request body for *request*; pure.

    ``max_tokens`` is mandatory on this API: *default_max_tokens* fills in.
    With *thinking_budget*, no temperature is sent (thinking accepts only 1),
    except where the history ends in a tool loop begun without thinking (a turn keeps
    the thinking setting it began with, and the API refuses thinking in a turn begun
    without it, with a 400): that request goes without thinking
    (and so with the temperature, and ``max_tokens`` unchecked against the
    budget), as does a ``thinking`` from *extra_body*, whose fields (checked,
    none of them one this builds) are merged into the body's top level.

    Raises:
        ProviderError: ``INVALID_REQUEST``: thinking is on and ``max_tokens``
            is not above *thinking_budget*, a stop sequence is empty or only
            whitespace, or a tool's name is one the API refuses.
    """
    messages, extra_system, refused = anthropic_transcript(request.messages)
    if refused:
        thinking_budget = None
    body: JsonObject = {
        "model": request.model,
        "max_tokens": _max_tokens(request, default_max_tokens, thinking_budget),
        "messages": messages,
    }
    system = request.system
    if extra_system:
        system = "\n\n".join(([system] if system else []) + extra_system)
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = anthropic_tools(request.tools)
    if request.temperature is not None and thinking_budget is None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop_sequences"] = _stop_sequences(request.stop)
    if thinking_budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    if stream:
        body["stream"] = True
    merge_extra_body(body, extra_body)
    if refused:
        body.pop("thinking", None)
    return body
