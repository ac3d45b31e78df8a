"""A header delta the fold cannot apply is a typed refusal, before anything is logged (R4.5, R8.5)."""

from __future__ import annotations

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


def _headed(name: str) -> Session:
    session = _in_a_turn()
    header = EpochHeader(LlmCallConfig("m"), tools=(ToolSchema(name, "d", {}),))
    session.append(RequestHeader(header, "initial"))
    return session


@pytest.mark.parametrize(
    ("session_name", "delta"),
    [
        ("t", ToolsDelta(changed=(ToolSchema(_Name("t"), "d", {"type": "object"}),))),
        (_Name("t"), ToolsDelta(removed=("t",))),
    ],
    ids=["delta-holds-the-name", "header-holds-the-name"],
)
def test_a_delta_whose_tool_names_cannot_key_the_fold_is_refused_typed(
    session_name: str, delta: ToolsDelta
) -> None:
    """R4.5, R8.5: every field is type-checked when built, yet a str subclass without a hash
    passes as a tool name; the fold fails on it, and append refuses the delta, logging nothing."""
    session = _headed(session_name)
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
    session = _headed("t")
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
