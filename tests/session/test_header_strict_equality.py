"""A request-header change only JSON sees is a change: owed, logged and checked (R8.1, R8.4, R8.9, R1.6).

Python holds ``True == 1 == 1.0`` and ``0.0 == -0.0``; JSON writes each differently,
so a request that sends one where the log holds another is not what the log records.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from retinue import AgentOptions, Message
from retinue._content import OpaqueBlock
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest, ToolSchema
from retinue.loop import header_event
from retinue.session import (
    EpochHeader,
    Event,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    StepStart,
    TurnStart,
    TurnTrigger,
    apply_delta,
    dump_event,
    make_delta,
)
from retinue.testing import (
    InvariantError,
    RebuildCheckedModel,
    Reply,
    ScriptedModel,
    check_request_rebuild,
)
from tests.helpers import Next, runtime

CONFIG = LlmCallConfig("m")


def _tool(parameters: dict[str, Any]) -> EpochHeader:
    return EpochHeader(CONFIG, "sys", (ToolSchema("t", "d", {"type": "object", **parameters}),))


def _config(**fields: Any) -> EpochHeader:
    return EpochHeader(LlmCallConfig("m", **fields), "sys")


def _prefix(data: dict[str, Any]) -> EpochHeader:
    return EpochHeader(CONFIG, "sys", message_prefix=(Message("user", (OpaqueBlock("x", data),)),))


# Each pair is equal to Python and written differently as JSON.
PAIRS = {
    "schema-false-to-0": (
        _tool({"additionalProperties": False}),
        _tool({"additionalProperties": 0}),
    ),
    "schema-0-to-false": (
        _tool({"additionalProperties": 0}),
        _tool({"additionalProperties": False}),
    ),
    "schema-true-to-1.0": (_tool({"const": True}), _tool({"const": 1.0})),
    "schema-enum-1-to-true": (_tool({"enum": [1, 2]}), _tool({"enum": [True, 2]})),
    "schema-0.0-to--0.0": (_tool({"default": 0.0}), _tool({"default": -0.0})),
    "temperature-1-to-1.0": (_config(temperature=1), _config(temperature=1.0)),
    "temperature-0.0-to--0.0": (_config(temperature=0.0), _config(temperature=-0.0)),
    "prefix-1-to-true": (_prefix({"n": 1}), _prefix({"n": True})),
}


def _wire(header: EpochHeader | None) -> str:
    """The header as a store writes it."""
    assert header is not None
    return json.dumps(dump_event(Event(0, 0, RequestHeader(header, "initial"))), sort_keys=True)


def _anchored(header: EpochHeader) -> Session:
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(RequestHeader(header, "initial"))
    return session


@pytest.mark.parametrize(("old", "new"), PAIRS.values(), ids=PAIRS.keys())
def test_a_change_only_json_sees_is_owed_as_a_delta_that_logs_it(
    old: EpochHeader, new: EpochHeader
) -> None:
    """R8.4, R8.1: the loop owes a header event, and the log then holds what is sent."""
    assert old == new
    assert _wire(old) != _wire(new)
    session = _anchored(old)
    owed = header_event(session, new, anchored=True)
    assert isinstance(owed, RequestHeaderDelta)
    session.append(owed)
    assert _wire(session.current_header) == _wire(new)


@pytest.mark.parametrize(("old", "new"), PAIRS.values(), ids=PAIRS.keys())
def test_make_delta_carries_a_change_only_json_sees(old: EpochHeader, new: EpochHeader) -> None:
    """R8.4 case 3: the delta is not empty, and applying it gives the new header's JSON."""
    delta = make_delta(old, new)
    assert delta is not None
    assert delta != RequestHeaderDelta()
    assert _wire(apply_delta(old, delta)) == _wire(new)


def test_a_header_rebuilt_equal_as_json_owes_nothing() -> None:
    """R8.4: fresh objects, keys in another order, the same JSON: no event is owed."""
    old = EpochHeader(
        LlmCallConfig("m", temperature=0.5, stop=["x"]),
        "sys",
        (ToolSchema("t", "d", {"type": "object", "properties": {"a": {"type": "integer"}}}),),
    )
    new = EpochHeader(
        LlmCallConfig("m", temperature=0.5, stop=("x",)),
        "sys",
        (ToolSchema("t", "d", {"properties": {"a": {"type": "integer"}}, "type": "object"}),),
    )
    assert header_event(_anchored(old), new, anchored=True) is None
    assert make_delta(old, new) == RequestHeaderDelta()


@pytest.mark.parametrize(
    ("part", "logged", "sent"),
    [
        ("tools", PAIRS["schema-false-to-0"][0], PAIRS["schema-false-to-0"][1]),
        ("config", PAIRS["temperature-1-to-1.0"][0], PAIRS["temperature-1-to-1.0"][1]),
        ("messages", PAIRS["prefix-1-to-true"][0], PAIRS["prefix-1-to-true"][1]),
    ],
    ids=["tools", "config", "messages"],
)
def test_the_rebuild_check_refuses_a_request_that_differs_only_as_json(
    part: str, logged: EpochHeader, sent: EpochHeader
) -> None:
    """R8.9: the dev-mode check compares what is sent, so it names the part."""
    session = _anchored(logged)
    session.append(StepStart(1, 1))
    request = ModelRequest(
        config=sent.config,
        messages=MessageHistory(sent.message_prefix),
        system=sent.system,
        tools=sent.tools,
        session_id="s",
    )
    with pytest.raises(InvariantError, match=f"request's {part} differ"):
        check_request_rebuild(session, request)


async def test_a_listener_sending_temperature_1_as_1_0_is_logged_and_rebuilds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R8.4, R8.9: end to end, the second turn's request sends ``1.0``; its log says ``1.0``."""
    model = ScriptedModel([Reply("a"), Reply("b")])
    checked = RebuildCheckedModel(model)
    async with runtime(checked) as rt:
        checked.follow(rt)
        agent = await rt.create_agent("a", AgentOptions(model="scripted", temperature=1))

        async def as_float(_agent: object, turn: int, _step: int, _seed: Any, next_: Next) -> Any:
            chosen = await next_()
            return attrs.evolve(chosen, temperature=1.0) if turn == 2 else chosen

        rt.hooks.on("agent/request", as_float, agent=agent)
        assert (await agent.ask("one")).reason.kind == "completed"
        assert (await agent.ask("two")).reason.kind == "completed"
        events = agent.session.events
    sent = [type(request.config.temperature) for request in model.requests]
    assert sent == [int, float]
    deltas = [e.data for e in events if isinstance(e.data, RequestHeaderDelta)]
    assert [type(delta.config.temperature) for delta in deltas if delta.config] == [float]
    assert checked.checked == 2
    assert checked.failures == []
