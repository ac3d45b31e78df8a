"""The checks of a call's final result beyond its content: its error flag and the context a
listener attaches to it (R9.3 stage 5, R9.4)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from retinue._content import Text
from retinue._sources import HookContext
from retinue.hooks import Accept
from retinue.tools import ToolExecution, ToolExecutionResult
from tests.helpers import DEADLINE, Next, unchecked
from tests.scenarios._tool_pipeline_kit import call, failed, setup, shape

INVALID_JSON = ("INVALID_JSON", "InvalidJsonError")


@pytest.mark.parametrize("flag", [1, "yes", None], ids=["int", "str", "none"])
async def test_a_result_whose_error_flag_is_no_bool_becomes_an_error(
    autojump_clock: trio.testing.MockClock, flag: object
) -> None:
    """R9.3: the final result is validated as lossless JSON, its ``is_error`` a bool: a
    ``tools/execute`` wrapper's result flagged otherwise is the call's error, not logged
    with a flag no reload reads back as the same."""
    with trio.fail_after(DEADLINE):
        hooks, registry = setup()

        def flagged(execution: ToolExecution, _call_next: Next) -> ToolExecutionResult:
            return ToolExecutionResult(execution.call_id, "done", flag)  # type: ignore[arg-type]

        hooks.on("tools/execute", flagged)
        result = await registry.execute(call())
        assert shape(result) == failed("is_error is not a bool", *INVALID_JSON)


# The call runs the sync ``echo`` body in a worker thread, where the virtual clock would jump
# past any trio deadline while the thread works: this test runs on the real clock, bounded in
# real time.
@pytest.mark.timeout(30)
async def test_a_result_whose_additional_context_is_no_json_becomes_an_error() -> None:
    """R9.3, R9.4: the context a ``tools/post-execute`` listener attaches to the result is
    validated with it: a block of it that is no lossless JSON makes the call's error, named
    by its path, where it would reach the loop to be injected and logged."""
    hooks, registry = setup()
    context = HookContext(unchecked(Text, float("nan")))
    hooks.on("tools/post-execute", lambda *_: Accept(additional_context=context))
    result = await registry.execute(call())
    assert shape(result) == failed(
        "additional_context[0].text is a non-finite number (nan)", *INVALID_JSON
    )
    assert result.additional_context is None
