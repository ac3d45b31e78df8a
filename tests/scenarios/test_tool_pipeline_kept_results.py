"""A body's result kept when what called it was cancelled while the body ran without a
schedule point (R9.2, R9.3)."""

from __future__ import annotations

import trio
import trio.testing

from retinue.tools import ToolExecutionResult, tool
from tests.helpers import DEADLINE
from tests.scenarios._tool_pipeline_kit import call, setup, shape


async def test_execute_keeps_the_result_of_a_body_that_cancelled_its_caller_without_awaiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2, R9.3: a body that cancels what called it (as a tool cancelling its own agent's
    turn does) and returns without a schedule point ran to its end: ``execute`` returns its
    result, and the cancel is met at the caller's next checkpoint, not in the pipeline, which
    would drop the result of a body whose effects are done.
    """
    results: list[ToolExecutionResult] = []
    with trio.fail_after(DEADLINE), trio.CancelScope() as caller:

        @tool
        async def halt() -> str:
            """Cancel the caller and answer at once."""
            caller.cancel()
            return "halted"

        _, registry = setup(halt)
        results.append(await registry.execute(call("halt", {})))
        await trio.lowlevel.checkpoint()
    assert caller.cancelled_caught
    assert [shape(result) for result in results] == [
        {"text": "halted", "is_error": False, "error": None}
    ]
