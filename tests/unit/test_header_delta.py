"""Request-header deltas: make_delta / apply_delta / fold and the owed header event (SPEC 8; T-R1)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import assume, given, strategies as st

from retinue import Message, SessionError, Text
from retinue._request import LlmCallConfig, ToolSchema
from retinue.loop import header_event
from retinue.session import (
    EpochHeader,
    Event,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SystemEdit,
    ToolsDelta,
    TurnStart,
    TurnTrigger,
    apply_delta,
    dump_event,
    fold_header,
    load_event,
    make_delta,
)

lines = st.text(st.sampled_from("ab \t{}"), max_size=4)
systems = st.one_of(st.none(), st.lists(lines, min_size=1, max_size=6).map("\n".join).filter(bool))
configs = st.builds(
    LlmCallConfig,
    model=st.sampled_from(["m1", "m2"]),
    provider=st.sampled_from([None, "p"]),
    temperature=st.sampled_from([None, 0.0, 0.5]),
    max_tokens=st.sampled_from([None, 1, 4096]),
    stop=st.sampled_from([None, (), ("END",), ("a", "b")]),
)
tool_pool = [
    ToolSchema(name, description, {"type": "object", "properties": {"x": {"type": kind}}})
    for name in ("alpha", "beta", "gamma", "delta")
    for description, kind in (("v1", "string"), ("v2", "integer"))
]


@st.composite
def tool_lists(draw: st.DrawFn) -> tuple[ToolSchema, ...]:
    """Tools with unique names, in any order, each in one of two versions."""
    names = draw(
        st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), unique=True, max_size=4)
    )
    return tuple(draw(st.sampled_from([t for t in tool_pool if t.name == name])) for name in names)


prefixes = st.lists(
    st.builds(
        lambda role, text: Message(role, (Text(text),)),
        st.sampled_from(["user", "assistant"]),
        lines,
    ),
    max_size=2,
).map(tuple)
headers = st.builds(EpochHeader, configs, systems, tool_lists(), prefixes)


@given(headers, headers)
def test_delta_applies_back_to_the_new_header_whenever_one_is_returned(
    old: EpochHeader, new: EpochHeader
) -> None:
    """R8.4 case 3: apply(old, make_delta(old, new)) == new whenever a delta is returned."""
    delta = make_delta(old, new)
    if delta is not None:
        assert apply_delta(old, delta) == new
        assert fold_header(old, delta) == new


@given(headers, headers)
def test_delta_always_exists_when_the_tools_are_unchanged(
    old: EpochHeader, new: EpochHeader
) -> None:
    """R8.5: system line edits, whole config and whole prefix always round-trip."""
    new = EpochHeader(new.config, new.system, old.tools, new.message_prefix)
    delta = make_delta(old, new)
    assert delta is not None
    assert delta.tools is None
    assert (delta.config is None) == (old.config == new.config)
    assert (delta.system is None) == (old.system == new.system)
    assert (delta.message_prefix is None) == (old.message_prefix == new.message_prefix)


@given(headers)
def test_delta_of_an_unchanged_header_is_empty(header: EpochHeader) -> None:
    """R8.4 case 2: an unchanged header yields an all-absent delta (and the loop logs nothing)."""
    assert make_delta(header, header) == RequestHeaderDelta()


@given(headers, headers)
def test_delta_survives_the_json_codec(old: EpochHeader, new: EpochHeader) -> None:
    """R8.5, R1.6: a delta event round-trips through its JSON shape unchanged."""
    delta = make_delta(old, new)
    assume(delta is not None)
    assert delta is not None
    event = Event(3, 1000, delta)
    raw = json.loads(json.dumps(dump_event(event)))
    assert load_event(raw) == event


@given(tool_lists().filter(lambda tools: len(tools) >= 2), st.randoms(use_true_random=False))
def test_pure_tool_reordering_has_no_delta(tools: tuple[ToolSchema, ...], random: object) -> None:
    """R8.4 case 4: reordering the same tools cannot be expressed as a delta."""
    shuffled = list(tools)
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    assume(tuple(shuffled) != tools)
    config = LlmCallConfig("m")
    assert (
        make_delta(EpochHeader(config, tools=tools), EpochHeader(config, tools=tuple(shuffled)))
        is None
    )


def test_system_edit_keeps_common_lines_and_inserts_the_rest() -> None:
    """R8.5: the system delta trims the common prefix and suffix lines."""
    config = LlmCallConfig("m")
    old = EpochHeader(config, "one\ntwo\nthree\nfour")
    new = EpochHeader(config, "one\n2\n2b\nfour")
    delta = make_delta(old, new)
    assert delta == RequestHeaderDelta(
        system=SystemEdit(
            1,
            1,
            (
                "2",
                "2b",
            ),
        )
    )
    assert make_delta(old, EpochHeader(config)) == RequestHeaderDelta(system=SystemEdit(0, 0, ()))


def test_tools_delta_is_keyed_by_name() -> None:
    """R8.5: removed dropped, changed replaced in place, added appended."""
    alpha1, alpha2 = tool_pool[0], tool_pool[1]
    beta, gamma = tool_pool[2], tool_pool[4]
    config = LlmCallConfig("m")
    old = EpochHeader(config, tools=(alpha1, beta))
    new = EpochHeader(config, tools=(alpha2, gamma))
    delta = make_delta(old, new)
    assert delta == RequestHeaderDelta(
        tools=ToolsDelta(added=(gamma,), removed=("beta",), changed=(alpha2,))
    )


def test_appending_in_the_middle_is_not_a_delta() -> None:
    """R8.4 case 4: an added tool placed before existing ones cannot be appended by a delta."""
    config = LlmCallConfig("m")
    alpha, beta = tool_pool[0], tool_pool[2]
    assert (
        make_delta(EpochHeader(config, tools=(beta,)), EpochHeader(config, tools=(alpha, beta)))
        is None
    )


def test_fold_rejects_a_delta_before_any_header() -> None:
    """R4.18: a delta with nothing to amend is a corrupt log."""
    with pytest.raises(SessionError) as caught:
        fold_header(None, RequestHeaderDelta(config=LlmCallConfig("m")))
    assert caught.value.code == "CORRUPT_HEADER"


def test_apply_rejects_a_system_edit_that_keeps_missing_lines() -> None:
    """R8.5: a system edit keeping more lines than exist is corrupt."""
    with pytest.raises(SessionError) as caught:
        apply_delta(
            EpochHeader(LlmCallConfig("m"), "one"), RequestHeaderDelta(system=SystemEdit(1, 1))
        )
    assert caught.value.code == "CORRUPT_HEADER"


def _anchored(header: EpochHeader) -> Session:
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(RequestHeader(header, "initial"))
    return session


@pytest.mark.parametrize(
    "build",
    [
        lambda: SystemEdit(1, 0, insert="be brief"),
        lambda: SystemEdit(0, 0, insert=None),  # type: ignore[arg-type]
        lambda: ToolsDelta(removed="search"),
        lambda: ToolsDelta(removed={"search"}),
        lambda: ToolsDelta(added={}),  # type: ignore[arg-type]
        lambda: EpochHeader(LlmCallConfig("m"), tools=ToolSchema("f", "d", {})),  # type: ignore[arg-type]
    ],
    ids=["insert-str", "insert-none", "removed-str", "removed-set", "added-dict", "tools-one"],
)
def test_lines_and_tools_given_as_one_value_are_refused_naming_the_field(build: Any) -> None:
    """R8.5: a system edit's lines and a tools delta's names and schemas are lists; one str is
    refused, naming the field, not split into characters: ``insert="be brief"`` would fold eight
    one-character lines into the system prompt, and ``removed="search"`` remove tools s, e, a..."""
    with pytest.raises(TypeError, match=r"(SystemEdit|ToolsDelta|EpochHeader)\.\w+ must be"):
        build()


@pytest.mark.parametrize("system", [0, 0.0, False, b"", [], ()], ids=repr)
def test_a_header_system_that_is_no_str_is_refused_even_when_empty(system: object) -> None:
    """R8.2, R4.5: only an empty str is an absent system prompt; a value of another type is
    refused naming the field, not logged as a header without one."""
    with pytest.raises(TypeError, match=r"EpochHeader\.system must be a str or None"):
        EpochHeader(LlmCallConfig("m"), system)  # type: ignore[arg-type]


def test_lines_and_tools_in_any_ordered_iterable_are_taken() -> None:
    """R8.5: a list, a tuple or a generator of lines or schemas is taken in its order."""
    tool = ToolSchema("f", "d", {})
    assert SystemEdit(0, 0, insert=(line for line in ["a", "b"])).insert == ("a", "b")
    assert ToolsDelta(added=[tool], removed=["g"]) == ToolsDelta(added=(tool,), removed=("g",))


def test_header_event_chooses_initial_resume_silence_delta_or_fallback() -> None:
    """R8.4: exactly one case applies: initial, resume, nothing, delta, fallback."""
    alpha, beta = tool_pool[0], tool_pool[2]
    base = EpochHeader(LlmCallConfig("m"), "sys", (alpha, beta))
    assert header_event(Session.create("fresh"), base, anchored=False) == RequestHeader(
        base, "initial"
    )
    session = _anchored(base)
    assert header_event(session, base, anchored=False) == RequestHeader(base, "resume")
    assert header_event(session, base, anchored=True) is None
    switched = EpochHeader(LlmCallConfig("m2"), "sys", (alpha, beta))
    assert header_event(session, switched, anchored=True) == RequestHeaderDelta(
        config=LlmCallConfig("m2")
    )
    reordered = EpochHeader(LlmCallConfig("m"), "sys", (beta, alpha))
    assert header_event(session, reordered, anchored=True) == RequestHeader(reordered, "fallback")


# Values of the wrong type, as a caller without a type checker passes them.
_NONE: Any = None
_FIVE: Any = 5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: make_delta(_NONE, _NONE), "make_delta: old must be an EpochHeader, got None"),
        (
            lambda: apply_delta(_NONE, RequestHeaderDelta()),
            "apply_delta: old must be an EpochHeader",
        ),
        (
            lambda: apply_delta(EpochHeader(LlmCallConfig("m")), _FIVE),
            "apply_delta: delta must be a RequestHeaderDelta, got 5",
        ),
        (
            lambda: fold_header(None, _FIVE),
            "fold_header: data must be a RequestHeader or a Request",
        ),
        (
            lambda: fold_header(_FIVE, RequestHeaderDelta()),
            "fold_header: current must be None or an",
        ),
        (lambda: dump_event(_FIVE), "dump_event takes an Event of event data, got 5"),
        (lambda: dump_event(Event(0, 0, _NONE)), "dump_event takes an Event of event data"),
    ],
    ids=[
        "make-none",
        "apply-none",
        "apply-int",
        "fold-int",
        "fold-current",
        "dump-int",
        "dump-none",
    ],
)
def test_public_folds_and_dump_refuse_a_misplaced_argument_naming_it(
    call: Any, message: str
) -> None:
    """R8.3, R8.5: the folds and dump_event refuse a value of the wrong type with a TypeError naming
    the function and argument: ``apply_delta(None, delta)`` does not return None, and the rest raise
    no AttributeError nor a SessionError saying a delta preceded the first header."""
    with pytest.raises(TypeError, match=re.escape(message)):
        call()
