"""``sessions show``'s rendering of a stored log, and the notes its commands share."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from retinue._content import Text, ToolCall, content_text
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    Event,
    EventData,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SteeringMessage,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
)

__all__ = ["describe", "torn_tail", "when"]


def describe(session: Session, *, dropped: int = 0) -> Iterator[str]:
    """Render a log readably: turns, steps, the model where it changes, tool calls and
    results, usage, end reasons.

    *dropped* is how many stored records after *session*'s events were left
    out as a torn tail; they are noted, so a short log is not taken for whole.
    """
    header = session.header
    yield (
        f"session {header.id}  created {when(header.created_at)}  events {len(session.events)}"
        + (f"  cwd {header.cwd}" if header.cwd else "")
        + (f"  parent {header.parent_session}" if header.parent_session else "")
    )
    model: str | None = None
    for event in session.events:
        requested = _requested_model(event.data)
        if requested is not None and requested != model:
            # Printed where it changes only: a header event repeats it at every resume.
            model = requested
            yield f"    model: {_short(model)}"
        line = _describe_event(event)
        if line is not None:
            yield line
    if dropped:
        yield f"({torn_tail(len(session.events), dropped)})"
    if session.is_turn_open:
        yield f"(turn {session.last_turn} is still open: the log ends mid-turn)"


def torn_tail(kept: int, dropped: int) -> str:
    """Say that the *dropped* stored records after the *kept* events were left out."""
    if dropped == 1:
        which = f"1 stored record after seq {kept - 1}" if kept else "the only stored record"
        return f"{which} is a torn tail and was left out"
    which = (
        f"{dropped} stored records after seq {kept - 1}"
        if kept
        else f"all {dropped} stored records"
    )
    return f"{which} are a torn tail and were left out"


def _describe_event(event: Event) -> str | None:
    data = event.data
    if isinstance(data, TurnStart):
        source = data.trigger.source.plugin or data.trigger.source.kind
        return f"turn {data.turn}  ({data.trigger.kind} from {source})"
    if isinstance(data, TurnEnd):
        return _describe_end(data.reason)
    if isinstance(data, UserMessage):
        return f"  user: {_short(content_text(data.content))}"
    if isinstance(data, ContextMessage | SteeringMessage | PromptBlocked):
        return _describe_input(data)
    if isinstance(data, StepStart):
        return f"  step {data.step}"
    if isinstance(data, AssistantMessage):
        return _describe_assistant(data)
    if isinstance(data, ToolCallEvent):
        return f"    tool call {data.name}({_short(data.arguments, 60)})  [{data.call_id}]"
    if isinstance(data, ToolResultEvent):
        status = "error" if data.is_error else "ok"
        code = f" {data.error.code}" if data.error is not None else ""
        return f"    tool result [{data.call_id}] {status}{code}: {_short(content_text(data.content), 60)}"
    return None


def _requested_model(data: EventData) -> str | None:
    """The model a request header event sets, or ``None`` for any other event."""
    if isinstance(data, RequestHeader):
        return data.header.config.model
    if isinstance(data, RequestHeaderDelta) and data.config is not None:
        return data.config.model
    return None


def _describe_end(reason: TurnEndReason) -> str:
    """A turn's end: its kind, an error's code as a tool result's line has it, and why."""
    code = f" {reason.code}" if reason.code else ""
    detail = reason.message or reason.reason
    return f"  end: {reason.kind}{code}" + (f" ({detail})" if detail else "")


def _describe_input(data: ContextMessage | SteeringMessage | PromptBlocked) -> str:
    """Context, steering or a blocked prompt, with who gave it when not the user."""
    source = data.source.plugin or data.source.kind
    given = "" if source == "user" else f" (from {source})"
    text = _short(content_text(data.content))
    if isinstance(data, PromptBlocked):
        return f"  blocked{given}: {text}" + (f"  [{data.reason}]" if data.reason else "")
    kind = "context" if isinstance(data, ContextMessage) else "steering"
    return f"  {kind}{given}: {text}"


def _describe_assistant(data: AssistantMessage) -> str:
    parts = []
    text = "".join(block.text for block in data.content if isinstance(block, Text))
    if text:
        parts.append(f"assistant: {_short(text)}")
    calls = [block.name for block in data.content if isinstance(block, ToolCall)]
    if calls:
        parts.append(f"asks for {', '.join(calls)}")
    if data.usage is not None:
        parts.append(f"usage in {data.usage.input_tokens} out {data.usage.output_tokens}")
    return "    " + "; ".join(parts or ["assistant: (empty)"])


def _short(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def when(millis: int) -> str:
    """UTC time of *millis*; the raw number when no date has it, so one odd header
    never aborts a whole listing."""
    try:
        moment = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    except (OverflowError, ValueError, OSError):
        return f"{millis} ms (out of range)"
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")
