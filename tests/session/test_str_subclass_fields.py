"""Every logged str field given a str subclass holds the plain str of its text (R1.6, R4.1).

The log stores a string's text, and a reload gives a plain str: a field holding a
``StrEnum`` member, or a subclass writing its own ``__str__`` or ``==``, would be one
value live and another loaded back. A subclass is taken, as ``json`` and ``cattrs``
take it, and held as ``str.__str__`` of it; a value that is no str is refused as before.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable
from typing import Any, cast

import pytest

from retinue._content import (
    Message,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._errors import InvalidJsonError, SessionError
from retinue._request import LlmCallConfig, ToolSchema
from retinue._sources import MessageSource, resolve_source
from retinue.session import (
    AssistantMessage,
    EpochHeader,
    Event,
    EventData,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SessionHeader,
    SystemEdit,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    ToolsDelta,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.session._codec import decode_event, encode_event, encode_header, load_header


class Hostile(str):
    """A str whose own ``__str__`` is not its text and whose ``==`` matches nothing."""

    __slots__ = ()

    def __str__(self) -> str:
        return "not the text"

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class Given(enum.StrEnum):
    BOGUS = "bogus"


Logged = EventData | SessionHeader
_CONFIG = LlmCallConfig("m")
_SCHEMA = {"type": "object"}


def _header(**fields: Any) -> RequestHeader:
    return RequestHeader(EpochHeader(**{"config": _CONFIG, **fields}), "initial")


def _first_block(data: Any) -> Any:
    return data.content[0]


# (field, its text, the logged value built around a given str, the field read back)
Case = tuple[str, str, Callable[[str], Logged], Callable[[Any], object]]
CASES: list[Case] = [
    (
        "ToolCallEvent.call_id",
        "c1",
        lambda v: ToolCallEvent(1, 1, v, "f", "{}"),
        lambda d: d.call_id,
    ),
    ("ToolCallEvent.name", "f", lambda v: ToolCallEvent(1, 1, "c1", v, "{}"), lambda d: d.name),
    (
        "ToolCallEvent.arguments",
        "{}",
        lambda v: ToolCallEvent(1, 1, "c", "f", v),
        lambda d: d.arguments,
    ),
    (
        "ToolResultEvent.call_id",
        "c1",
        lambda v: ToolResultEvent(1, 1, v, "ok"),
        lambda d: d.call_id,
    ),
    ("SessionHeader.id", "s1", lambda v: SessionHeader(v, 0), lambda d: d.id),
    ("SessionHeader.cwd", "/w", lambda v: SessionHeader("s", 0, cwd=v), lambda d: d.cwd),
    (
        "SessionHeader.parent_session",
        "p",
        lambda v: SessionHeader("s", 0, parent_session=v, seed_length=0),
        lambda d: d.parent_session,
    ),
    (
        "SystemEdit.insert",
        "line",
        lambda v: RequestHeaderDelta(system=SystemEdit(0, 0, (v,))),
        lambda d: d.system.insert[0],
    ),
    (
        "ToolsDelta.removed",
        "f",
        lambda v: RequestHeaderDelta(tools=ToolsDelta(removed=(v,))),
        lambda d: d.tools.removed[0],
    ),
    ("TurnEndReason.kind", "done", lambda v: TurnEnd(1, TurnEndReason(v)), lambda d: d.reason.kind),
    (
        "TurnEndReason.reason",
        "why",
        lambda v: TurnEnd(1, TurnEndReason.aborted(v)),
        lambda d: d.reason.reason,
    ),
    (
        "TurnEndReason.message",
        "bad",
        lambda v: TurnEnd(1, TurnEndReason.error(1, v)),
        lambda d: d.reason.message,
    ),
    (
        "TurnEndReason.code",
        "X",
        lambda v: TurnEnd(1, TurnEndReason.error(1, "bad", v)),
        lambda d: d.reason.code,
    ),
    (
        "PromptBlocked.reason",
        "no",
        lambda v: PromptBlocked((Text("hi"),), reason=v),
        lambda d: d.reason,
    ),
    (
        "ToolErrorInfo.name",
        "E",
        lambda v: ToolResultEvent(1, 1, "c", "x", is_error=True, error=ToolErrorInfo(v, "X")),
        lambda d: d.error.name,
    ),
    (
        "ToolErrorInfo.code",
        "X",
        lambda v: ToolResultEvent(1, 1, "c", "x", is_error=True, error=ToolErrorInfo("E", v)),
        lambda d: d.error.code,
    ),
    ("Text.text", "hi", lambda v: UserMessage((Text(v),)), lambda d: _first_block(d).text),
    ("content given as a str", "hi", UserMessage, lambda d: _first_block(d).text),
    (
        "MessageSource.kind",
        "mine",
        lambda v: UserMessage("hi", MessageSource(v)),
        lambda d: d.source.kind,
    ),
    (
        "MessageSource.plugin",
        "p",
        lambda v: UserMessage("hi", MessageSource("plugin", v)),
        lambda d: d.source.plugin,
    ),
    (
        "TurnTrigger.kind",
        "message",
        lambda v: TurnStart(1, TurnTrigger(v)),  # type: ignore[arg-type]
        lambda d: d.trigger.kind,
    ),
    (
        "ToolSchema.name",
        "f",
        lambda v: _header(tools=(ToolSchema(v, "d", _SCHEMA),)),
        lambda d: d.header.tools[0].name,
    ),
    (
        "ToolSchema.description",
        "d",
        lambda v: _header(tools=(ToolSchema("f", v, _SCHEMA),)),
        lambda d: d.header.tools[0].description,
    ),
    ("EpochHeader.system", "sys", lambda v: _header(system=v), lambda d: d.header.system),
    (
        "LlmCallConfig.model",
        "m",
        lambda v: _header(config=LlmCallConfig(v)),
        lambda d: d.header.config.model,
    ),
    (
        "LlmCallConfig.provider",
        "p",
        lambda v: _header(config=LlmCallConfig("m", provider=v)),
        lambda d: d.header.config.provider,
    ),
    (
        "LlmCallConfig.stop",
        "END",
        lambda v: _header(config=LlmCallConfig("m", stop=(v,))),
        lambda d: d.header.config.stop[0],
    ),
    (
        "Message.role",
        "user",
        lambda v: _header(message_prefix=(Message(v, (Text("hi"),)),)),  # type: ignore[arg-type]
        lambda d: d.header.message_prefix[0].role,
    ),
    (
        "RequestHeader.reason",
        "resume",
        lambda v: RequestHeader(EpochHeader(_CONFIG), v),  # type: ignore[arg-type]
        lambda d: d.reason,
    ),
    (
        "ToolCall.id",
        "c1",
        lambda v: AssistantMessage(1, 1, (ToolCall(v, "f", "{}"),)),
        lambda d: _first_block(d).id,
    ),
    (
        "ToolCall.name",
        "f",
        lambda v: AssistantMessage(1, 1, (ToolCall("c1", v, "{}"),)),
        lambda d: _first_block(d).name,
    ),
    (
        "ToolCall.arguments",
        "{}",
        lambda v: AssistantMessage(1, 1, (ToolCall("c1", "f", v),)),
        lambda d: _first_block(d).arguments,
    ),
    (
        "ToolResultBlock.tool_call_id",
        "c1",
        lambda v: UserMessage((ToolResultBlock(v, (Text("ok"),)),)),
        lambda d: _first_block(d).tool_call_id,
    ),
    (
        "Reasoning.text",
        "hm",
        lambda v: AssistantMessage(1, 1, (Reasoning(v),)),
        lambda d: _first_block(d).text,
    ),
    (
        "Reasoning.signature",
        "sig",
        lambda v: AssistantMessage(1, 1, (Reasoning("hm", signature=v),)),
        lambda d: _first_block(d).signature,
    ),
    (
        "RedactedReasoning.data",
        "opaque",
        lambda v: AssistantMessage(1, 1, (RedactedReasoning(v),)),
        lambda d: _first_block(d).data,
    ),
    (
        "OpaqueBlock.kind",
        "vendor",
        lambda v: AssistantMessage(1, 1, (OpaqueBlock(v, {}),)),
        lambda d: _first_block(d).kind,
    ),
]


def _given(text: str) -> list[str]:
    """*text* as a ``StrEnum`` member and as a hostile subclass."""
    members = cast("type[enum.StrEnum]", enum.StrEnum("Given", {"TEXT": text}))
    return [members["TEXT"], Hostile(text)]


def _reloaded(value: Logged) -> Logged:
    """*value* written as its stored line and read back."""
    if isinstance(value, SessionHeader):
        return load_header(json.loads(encode_header(value)))
    return decode_event(encode_event(Event(0, 1, value))).data


@pytest.mark.parametrize("subclass", ["enum", "hostile"])
@pytest.mark.parametrize(("field", "text", "build", "read"), CASES, ids=[c[0] for c in CASES])
def test_a_str_subclass_is_held_as_its_plain_text(
    field: str,
    text: str,
    build: Callable[[str], Logged],
    read: Callable[[Any], object],
    subclass: str,
) -> None:
    """R1.6 / R4.1: built, the field is exactly ``str`` holding the text; the stored line
    reloads as an equal value."""
    given = _given(text)[0 if subclass == "enum" else 1]
    logged = build(given)
    held = read(logged)
    assert type(held) is str, field
    assert held == text
    assert _reloaded(logged) == logged


REFUSALS: list[tuple[Callable[[], object], type[Exception], str]] = [
    (lambda: ToolCall(1, "f", "{}"), TypeError, "ToolCall.id must be a str, got 1"),  # type: ignore[arg-type]
    (lambda: ToolCall("c", "f", b"{}"), TypeError, "ToolCall.arguments must be a str, got b'{}'"),  # type: ignore[arg-type]
    (
        lambda: ToolResultBlock(1, ()),  # type: ignore[arg-type]
        TypeError,
        "ToolResultBlock.tool_call_id must be a str, got 1",
    ),
    (
        lambda: ToolCallEvent(1, 1, "c", "f", None),  # type: ignore[arg-type]
        InvalidJsonError,
        (
            "tool/call: call_id, name and arguments (the raw JSON text) must be strings, "
            "got 'c', 'f', None"
        ),
    ),
    (
        lambda: ToolResultEvent(1, 1, 1, "ok"),  # type: ignore[arg-type]
        TypeError,
        "ToolResultEvent.call_id must be a str, got 1",
    ),
    (lambda: SessionHeader(1, 0), SessionError, "session header id must be a str, got 1"),  # type: ignore[arg-type]
    (
        lambda: SessionHeader("s", 0, parent_session=2),  # type: ignore[arg-type]
        SessionError,
        "session header parent_session must be a str or None, got 2",
    ),
    (
        lambda: Session.create("s", cwd=b"/w"),  # type: ignore[arg-type]
        SessionError,
        "cwd must be an absolute path (a str): b'/w'",
    ),
    (
        lambda: Message(1, ()),  # type: ignore[arg-type]
        TypeError,
        "Message.role must be one of 'system', 'user', 'assistant', got 1",
    ),
    (
        lambda: TurnTrigger(1),  # type: ignore[arg-type]
        ValueError,
        "turn trigger kind must be one of message, injection; got 1",
    ),
    (
        lambda: SystemEdit(0, 0, (1,)),  # type: ignore[arg-type]
        InvalidJsonError,
        "SystemEdit.insert must hold only strings, got (1,)",
    ),
]


@pytest.mark.parametrize(("build", "error", "message"), REFUSALS)
def test_a_value_that_is_no_str_is_refused_as_before(
    build: Callable[[], object], error: type[Exception], message: str
) -> None:
    """R1.6 / R4.1: only a str is taken; anything else is refused, naming the field."""
    with pytest.raises(error) as caught:
        build()
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: Message(Hostile("user"), ()),  # type: ignore[arg-type]
            None,
        ),
        (
            lambda: Message(Hostile("bogus"), ()),  # type: ignore[arg-type]
            "Message.role must be one of 'system', 'user', 'assistant', got 'bogus'",
        ),
        (
            lambda: TurnTrigger(Given.BOGUS),  # type: ignore[arg-type]
            "turn trigger kind must be one of message, injection; got 'bogus'",
        ),
        (
            lambda: resolve_source(Hostile("user")),
            (
                "source 'user' would name a plugin called 'user': a str names a plugin; "
                "pass None for the user"
            ),
        ),
    ],
    ids=["role", "bogus-role", "bogus-trigger", "user-source"],
)
def test_a_str_subclass_is_judged_by_its_text(
    build: Callable[[], object], message: str | None
) -> None:
    """R1.2, R1.3, SPEC 4.3: a value checked against names is checked by its text, not
    by the subclass's own ``==``: a role is taken, a kind naming none and a plugin
    source named ``user`` are refused as the same plain str is."""
    if message is None:
        assert type(cast("Message", build()).role) is str
        return
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        build()
    assert str(caught.value) == message


def test_a_sessions_str_subclass_cwd_is_taken_as_its_text() -> None:
    """R4.3: ``Session.create`` takes an absolute cwd given as a str subclass, held plain."""
    session = Session.create("s", cwd=Hostile("/work"))
    assert (type(session.header.cwd), session.header.cwd) == (str, "/work")
