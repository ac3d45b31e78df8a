"""A header delta the fold cannot apply is a typed refusal, before anything is logged (R4.5, R8.5)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from retinue._errors import SessionError
from retinue._request import LlmCallConfig, ToolSchema
from retinue.session import (
    EpochHeader,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    ToolsDelta,
    TurnStart,
    TurnTrigger,
)


class _Name(str):
    """A tool name that compares like a str but, defining ``__eq__``, has no hash."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


def _in_a_turn() -> Session:
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    return session


def _headed(tool: ToolSchema) -> Session:
    session = _in_a_turn()
    header = EpochHeader(LlmCallConfig("m"), tools=(tool,))
    session.append(RequestHeader(header, "initial"))
    return session


def _schema(name: Any) -> ToolSchema:
    return ToolSchema(name, "d", {"type": "object"})


def _unchecked_schema(name: object) -> ToolSchema:
    """A schema named by *name*, built with attrs' validators switched off."""
    with attrs.validators.disabled():
        return _schema(name)


@pytest.mark.parametrize(
    ("held", "delta", "names"),
    [
        (_schema("t"), ToolsDelta(changed=(_schema(_Name("t")),)), ["t"]),
        (_schema(_Name("t")), ToolsDelta(removed=("t",)), []),
    ],
    ids=["delta-holds-the-name", "header-holds-the-name"],
)
def test_a_hashless_str_subclass_tool_name_is_folded_as_its_text(
    held: ToolSchema, delta: ToolsDelta, names: list[str]
) -> None:
    """R1.6, R8.5: a str subclass defining ``__eq__`` without ``__hash__`` is held as the
    plain str of its name, so it keys the fold's tables and the delta applies."""
    session = _headed(held)
    session.append(RequestHeaderDelta(tools=delta))
    header = session.current_header
    assert header is not None
    assert [(type(tool.name), tool.name) for tool in header.tools] == [(str, n) for n in names]


@pytest.mark.parametrize(
    ("held", "delta"),
    [
        (_schema("t"), ToolsDelta(changed=(_unchecked_schema(["t"]),))),
        (_unchecked_schema(["t"]), ToolsDelta(removed=("t",))),
    ],
    ids=["delta-holds-the-name", "header-holds-the-name"],
)
def test_a_delta_whose_tool_names_cannot_key_the_fold_is_refused_typed(
    held: ToolSchema, delta: ToolsDelta
) -> None:
    """R4.5, R8.5: built with attrs' validators switched off, a tool's name may be
    unhashable; the fold fails on it, and append refuses the delta, logging nothing."""
    session = _headed(held)
    before = session.current_header
    seen: list[int] = []
    session.observe(lambda event: seen.append(event.seq))
    with pytest.raises(SessionError) as caught:
        session.append(RequestHeaderDelta(tools=delta))
    assert caught.value.code == "CORRUPT_HEADER"
    assert "request/header-delta cannot be folded: unhashable type" in str(caught.value)
    assert isinstance(caught.value.__cause__, TypeError)
    assert (len(session.events), seen, session.current_header) == (2, [], before)


_TOOL = ToolSchema("t", "d", {})
_OTHER = ToolSchema("u", "d", {})


@pytest.mark.parametrize(
    ("delta", "problem"),
    [
        (ToolsDelta(removed=("u",)), "tools delta names 'u', which the header lacks"),
        (ToolsDelta(changed=(_OTHER,)), "tools delta names 'u', which the header lacks"),
        (ToolsDelta(added=(_TOOL,)), "tools delta adds a tool the header keeps"),
    ],
    ids=["removes-absent", "changes-absent", "adds-present"],
)
def test_a_tools_delta_not_made_from_the_header_is_refused_typed(
    delta: ToolsDelta, problem: str
) -> None:
    """R8.5: a delta naming tools as the header does not hold them would rebuild a request
    no model was sent, so it is refused, not folded silently (dropped, or a tool listed twice)."""
    session = _headed(_TOOL)
    before = session.current_header
    with pytest.raises(SessionError) as caught:
        session.append(RequestHeaderDelta(tools=delta))
    assert caught.value.code == "CORRUPT_HEADER"
    assert problem in str(caught.value)
    assert (len(session.events), session.current_header) == (2, before)


def test_a_header_listing_a_tool_twice_still_folds_the_deltas_made_from_it() -> None:
    """R8.5: an assembly listener may send a tool list naming one tool twice; the deltas
    made from such a header (and stored) still fold as they did when they were written."""
    session = _in_a_turn()
    twice = EpochHeader(LlmCallConfig("m"), tools=(_TOOL, _TOOL))
    session.append(RequestHeader(twice, "initial"))
    session.append(RequestHeaderDelta(tools=ToolsDelta(added=(_OTHER, _OTHER))))
    assert session.current_header is not None
    assert session.current_header.tools == (_TOOL, _TOOL, _OTHER, _OTHER)
