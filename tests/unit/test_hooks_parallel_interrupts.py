"""What a parallel dispatch raises when its listeners end in Ctrl-C and a cancel at once (R6.4)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from retinue.hooks import HookBus
from tests.helpers import DEADLINE


async def test_ctrl_c_in_a_parallel_listener_wins_over_a_cancel_that_ended_another_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4: when one listener ends in a cancel from outside and a later one in Ctrl-C, the
    dispatch raises the Ctrl-C, bare: not the cancel its scope would swallow, which would
    leave the Ctrl-C unsaid and the runtime running on.
    """
    bus = HookBus()
    with trio.CancelScope() as outside:

        async def cancels(*_args: object) -> None:
            outside.cancel()
            await trio.sleep(10)

        async def interrupted(*_args: object) -> None:
            with trio.CancelScope(shield=True):
                await trio.sleep(1)
            raise KeyboardInterrupt

        bus.on("session/flush", cancels)
        bus.on("session/flush", interrupted)
        # Caught as any BaseException: a grouped Ctrl-C escaping the test would end the test run.
        with trio.fail_after(DEADLINE), pytest.raises(BaseException) as raised:
            await bus.parallel("session/flush", "agent", "session")
    assert type(raised.value) is KeyboardInterrupt
