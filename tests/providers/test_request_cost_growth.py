"""A request's body costs as much to build late in a long tool loop as early in it.

Built on what the session's previous request mapped (``providers/_settled.py``),
each body maps only the messages that are new, and nothing else it does may walk
back over the turn. Counted in function calls, which repeat exactly from run to
run, where timings would not.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from types import FrameType

import pytest

from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._request import MessageHistory, ModelRequest

from .test_settled_history import BUILDERS, CONFIG, Body

EARLY, LATE = 10, 400
"""Steps into the tool loop of the requests compared."""
SLACK = 1.1
"""How much more the late request may call (none more, measured here), where a walk back
over the loop calls about 11 more functions a step, 4,000 at step 400."""


def _tool_loop(steps: int) -> list[Message]:
    """A prompt, then *steps* steps of a thinking model calling a tool."""
    history = [Message("user", (Text("go"),))]
    for step in range(steps):
        call = ToolCall(f"call_{step}", "lookup", '{"q": 1}')
        history.append(Message("assistant", (Reasoning("hm", f"sig{step}"), call)))
        history.append(Message("user", (ToolResultBlock(call.id, (Text(f"r{step}"),), False),)))
    return history


def _calls(build: Callable[[ModelRequest], Body], request: ModelRequest) -> int:
    """How many functions (Python's and builtins) building *request*'s body calls."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    # A collection would run the finalizers of whatever earlier tests left behind, and
    # count their calls: none runs while counting.
    gc.collect()
    gc.disable()
    profiling = sys.getprofile()
    sys.setprofile(profile)
    try:
        build(request)
    finally:
        sys.setprofile(profiling)
        gc.enable()
    return count


@pytest.mark.parametrize("api", BUILDERS)
def test_a_request_late_in_a_long_tool_loop_costs_what_an_early_one_costs(api: str) -> None:
    """R10.6: each step's request of a 400-step loop is built on the one before; the
    request at step 400 calls as many functions as the one at step 10."""
    build = BUILDERS[api]
    history = _tool_loop(LATE)
    derived: dict[object, object] = {}
    calls = {}
    for steps in range(1, LATE + 1):
        request = ModelRequest(CONFIG, MessageHistory(history, 1 + 2 * steps, derived=derived))
        if steps in (EARLY, LATE):
            calls[steps] = _calls(build, request)
        else:
            build(request)
    assert calls[LATE] <= calls[EARLY] * SLACK, calls
