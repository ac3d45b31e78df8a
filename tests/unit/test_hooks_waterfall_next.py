"""A waterfall listener's ``next`` kept past its call (R6.3)."""

from __future__ import annotations

import pytest

from retinue._errors import HookError
from retinue.hooks import HookBus
from tests.helpers import Next


async def test_a_kept_next_called_after_its_listener_returned_raises_at_the_call() -> None:
    """R6.3: ``next`` runs the rest of the chain only while its listener's call lasts. Called
    once that call returned, it raises there, naming the seam: it hands back no coroutine,
    which a caller that does not await it (a callback, sync code) would drop unsaid, the
    mistake shown only as a warning of a coroutine never awaited.
    """
    bus = HookBus()
    ran: list[str] = []
    kept: list[Next] = []

    async def default() -> str:
        ran.append("default")  # pragma: no cover - must never run
        return "default"

    def keep_and_answer(_execution: object, next_: Next) -> str:
        kept.append(next_)
        return "answered"

    bus.on("tools/execute", keep_and_answer)
    assert await bus.waterfall("tools/execute", default, "execution") == "answered"
    with pytest.raises(
        HookError,
        match=(
            rf"^a tools/execute listener \({__name__}\.{keep_and_answer.__qualname__}\) "
            r"called next\(\) after the listener returned"
        ),
    ):
        kept[0]()  # type: ignore[unused-awaitable]  # raises before it could hand one back
    assert ran == []
