"""Whether what unwinds a task is only a cancel: its scope, still cancelled, meets the task
again, so neither the runtime's store close nor a crashed task's supervisor raises it."""

from __future__ import annotations

from retinue._errors import only_cancels
from tests.helpers import kept_stray_cancelled


async def test_a_cancel_bare_or_grouped_alone_is_only_a_cancel() -> None:
    cancel = await kept_stray_cancelled()
    assert only_cancels(cancel)
    assert only_cancels(BaseExceptionGroup("g", [cancel, BaseExceptionGroup("h", [cancel])]))


async def test_anything_beside_a_cancel_is_more_than_a_cancel() -> None:
    cancel = await kept_stray_cancelled()
    assert not only_cancels(KeyboardInterrupt())
    assert not only_cancels(SystemExit(2))
    assert not only_cancels(BaseExceptionGroup("g", [cancel, KeyboardInterrupt()]))
    assert not only_cancels(BaseExceptionGroup("g", [cancel, ValueError("v")]))
