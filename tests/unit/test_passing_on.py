"""What of user code's BaseException passes on: Ctrl-C, and a cancel only when it is real,
bare or in a group; the rest is the code's failure (R7.45, R7.48)."""

from __future__ import annotations

import contextlib
import functools
import gc
import weakref
from collections.abc import Callable

import pytest
import trio

from retinue._errors import failure_of, pass_on, synchronous_failure
from retinue.hooks import HookBus, HookError
from tests.helpers import kept_stray_cancelled


async def _real_cancel() -> trio.Cancelled:
    """A Cancelled delivered by a scope that is cancelled (kept after it was caught)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            return exc
    raise AssertionError("not reached")


async def test_a_group_with_ctrl_c_and_a_stray_cancel_passes_on_ctrl_c_alone() -> None:
    """Ctrl-C reaches the runtime; the stray cancel beside it must not end a task's owner."""
    stray = await kept_stray_cancelled()
    interrupt = KeyboardInterrupt()
    group = BaseExceptionGroup("g", [stray, interrupt, ValueError("v")])
    with pytest.raises(BaseExceptionGroup) as raised:
        pass_on(group)
    assert raised.value.exceptions == (interrupt,)
    assert raised.value.__cause__ is group


async def test_a_group_with_a_real_cancel_passes_on_the_cancel_alone() -> None:
    """Inside the cancelled scope, the cancel reaches it and the failure beside it does not
    escape the scope to end its owner."""
    with trio.CancelScope() as scope:
        scope.cancel()
        cancel = await _real_cancel()
        group = BaseExceptionGroup("g", [cancel, ValueError("v")])
        with pytest.raises(BaseExceptionGroup) as raised:
            pass_on(group)
        assert raised.value.exceptions == (cancel,)


async def test_a_group_of_real_cancels_reaches_the_cancelled_scope() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        cancel = await _real_cancel()
        pass_on(BaseExceptionGroup("g", [cancel]))
    assert scope.cancelled_caught


async def test_a_group_with_a_stray_cancel_is_a_stray_cancel_failure() -> None:
    group = BaseExceptionGroup("g", [await kept_stray_cancelled(), SystemExit(2)])
    failure = failure_of(group, "a listener", HookError)
    assert isinstance(failure, HookError)
    assert failure.code == "STRAY_CANCELLED"
    assert failure.__cause__ is group


async def test_a_synchronous_callbacks_group_is_its_failure_unless_it_holds_ctrl_c() -> None:
    """No cancel is delivered to synchronous code: a group holding one is the callback's own."""
    stray = await kept_stray_cancelled()
    assert synchronous_failure(BaseExceptionGroup("g", [stray]))
    assert synchronous_failure(BaseExceptionGroup("g", [stray, SystemExit(1)]))
    assert not synchronous_failure(BaseExceptionGroup("g", [stray, KeyboardInterrupt()]))
    assert not synchronous_failure(KeyboardInterrupt())


async def test_a_synchronous_listeners_grouped_cancel_is_its_failure_under_a_cancelled_scope() -> (
    None
):
    """R7.48: emit_raising judges a group holding a Cancelled as it judges a bare one, its
    listener's own failure, even while a scope around is cancelled, not taken for that scope's
    cancel and passed on."""
    bus = HookBus()
    cancel = await kept_stray_cancelled()

    def listener(*_args: object) -> None:
        raise BaseExceptionGroup("nursery", [cancel])

    bus.on("session/event", listener)
    with trio.CancelScope() as scope:  # noqa: ASYNC100 - cancelled, not waited in: what the judgement reads
        scope.cancel()
        with pytest.raises(HookError) as raised:
            bus.emit_raising("session/event", object(), object())
    assert raised.value.code == "STRAY_CANCELLED"
    assert "a session/event listener" in str(raised.value)


class _Interrupt(KeyboardInterrupt):
    """Ctrl-C, weakly referable (a bare exception is not)."""


def _dropped_once_passed_on(
    call: Callable[[BaseException], object], *, grouped: bool
) -> weakref.ref[_Interrupt]:
    """Pass a Ctrl-C on through *call*, drop what it raises; a weak reference to the Ctrl-C."""
    interrupt = _Interrupt()
    kept = weakref.ref(interrupt)
    # Handed over in a list and dropped from this frame, which the traceback holds.
    raised: list[BaseException] = [BaseExceptionGroup("g", [interrupt]) if grouped else interrupt]
    del interrupt
    with contextlib.suppress(KeyboardInterrupt, BaseExceptionGroup):
        call(raised.pop())
    return kept


@pytest.mark.parametrize("grouped", [False, True], ids=["bare", "grouped"])
@pytest.mark.parametrize(
    "call",
    [pass_on, functools.partial(failure_of, culprit="a listener", kind=HookError)],
    ids=["pass_on", "failure_of"],
)
def test_what_passes_on_goes_with_the_last_reference_to_it(
    call: Callable[[BaseException], object], *, grouped: bool
) -> None:
    """The frames it is raised through, in its traceback, do not hold it: no cycle keeps it
    (with every frame below) for the cyclic collector."""
    gc.collect()
    gc.disable()
    try:
        kept = _dropped_once_passed_on(call, grouped=grouped)
        assert kept() is None
    finally:
        gc.enable()
