"""A scripted tool call given a ``StrEnum`` id runs as a call of its text (R1.6, R9.1).

The model's call block holds the id as a plain str, so the loop's ``tool/call``
record takes it, the tool runs and the log loads back as it was logged.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import trio
import trio.testing

from retinue.session import ToolCallEvent, ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, echo, of_type, runtime, turn_ends


class CallId(enum.StrEnum):
    C1 = "c1"


async def test_a_strenum_call_id_runs_the_call_under_its_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.1: the turn completes, its call and result carry the id as the str ``"c1"``
    (the runtime opens under a virtual deadline)."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "hi"}', id=CallId.C1)]), Reply("done")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
        events = agent.session.events
        assert turn_ends(events) == ["completed"]
        call = of_type(events, "tool/call")[0].data
        result = of_type(events, "tool/result")[0].data
        assert isinstance(call, ToolCallEvent)
        assert isinstance(result, ToolResultEvent)
        assert (type(call.call_id), call.call_id) == (str, "c1")
        assert (type(result.call_id), result.call_id) == (str, "c1")
        dumped: list[Any] = json.loads(json.dumps(agent.session.dump()))
        assert [line["data"]["call_id"] for line in dumped if line["type"] == "tool/call"] == ["c1"]
