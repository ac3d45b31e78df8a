"""The event bus's serial, strict serial, waterfall and parallel dispatch (SPEC 6.1, R6.2-R6.5)."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from retinue._errors import HookError
from retinue.hooks import HookBus, Stop
from tests.helpers import DEADLINE, Next, boom

# -- serial and strict serial --------------------------------------------------------------------


async def test_serial_awaits_listeners_one_after_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.2: serial runs listeners in registration order, each awaited before the next starts."""
    bus = HookBus()
    trace: list[str] = []

    async def slow(*args: object) -> None:
        trace.append(f"slow start {args}")
        await trio.sleep(5)
        trace.append("slow end")

    def quick(*args: object) -> str:
        trace.append(f"quick {args}")
        return "ignored"

    bus.on("agent/pre-step", slow)
    bus.on("agent/pre-step", quick)
    with trio.fail_after(DEADLINE):
        await bus.serial("agent/pre-step", "agent", 1)
    assert trace == ["slow start ('agent', 1)", "slow end", "quick ('agent', 1)"]


async def test_serial_failure_propagates_and_stops_the_chain() -> None:
    """R6.2: a raising serial listener makes the dispatch raise; later listeners do not run."""
    bus = HookBus()
    ran: list[str] = []
    bus.on("agent/pre-step", boom)
    bus.on("agent/pre-step", lambda *_: ran.append("later"))
    with pytest.raises(RuntimeError, match="listener failed"):
        await bus.serial("agent/pre-step", "agent")
    assert ran == []


async def test_dispatch_without_listeners_returns_nothing() -> None:
    """R6.2, R6.4: serial, strict serial and parallel with nobody listening return ``None``."""
    bus = HookBus()
    bus.on("agent/pre-step", boom, agent="someone-else")
    await bus.serial("agent/pre-step", "agent", scope="me")
    assert await bus.strict_serial("agent/turn-stop", "agent") is None
    await bus.parallel("session/flush", "agent", "session")


async def test_strict_serial_first_non_none_result_ends_the_chain() -> None:
    """R6.2, R7.37: ``None`` abstains; the first other value wins and stops the chain."""
    bus = HookBus()
    ran: list[str] = []
    stop = Stop()

    def abstain(*_args: object) -> None:
        ran.append("abstain")

    async def decide(*_args: object) -> object:
        await trio.lowlevel.checkpoint()
        ran.append("decide")
        return stop

    bus.on("agent/turn-stop", abstain)
    bus.on("agent/turn-stop", decide)
    bus.on("agent/turn-stop", lambda *_: ran.append("never"))
    assert await bus.strict_serial("agent/turn-stop", "agent", 1) is stop
    assert ran == ["abstain", "decide"]


@pytest.mark.parametrize("falsy", [False, 0, "", []])
async def test_strict_serial_falsy_result_ends_the_chain_as_an_invalid_one(falsy: object) -> None:
    """R6.2, R7.37: a falsy value is no abstention: it ends the chain, refused as what the
    seam does not take, naming the listener."""
    bus = HookBus()
    ran: list[str] = []
    bus.on("agent/turn-stop", lambda *_: falsy)
    bus.on("agent/turn-stop", lambda *_: ran.append("never"))
    with pytest.raises(HookError, match=rf"<lambda>\) returned {re.escape(repr(falsy))}, not None"):
        await bus.strict_serial("agent/turn-stop", "agent", 1)
    assert ran == []


async def test_strict_serial_all_abstaining_returns_none_and_failures_propagate() -> None:
    """R6.2: every listener abstaining yields ``None``; a raise propagates."""
    bus = HookBus()
    bus.on("agent/turn-stop", lambda *_: None)
    assert await bus.strict_serial("agent/turn-stop", "agent") is None
    bus.on("agent/turn-stop", boom)
    with pytest.raises(RuntimeError, match="listener failed"):
        await bus.strict_serial("agent/turn-stop", "agent")


# -- waterfall -----------------------------------------------------------------------------------


async def test_waterfall_without_listeners_returns_the_default() -> None:
    """R6.3: the innermost ``next`` is the default implementation."""
    bus = HookBus()

    async def default() -> str:
        await trio.lowlevel.checkpoint()
        return "default"

    assert await bus.waterfall("agent/request", default, "agent") == "default"


async def test_waterfall_first_registered_listener_is_outermost() -> None:
    """R6.3: listeners wrap each other in registration order around the default."""
    bus = HookBus()
    trace: list[str] = []

    async def default() -> list[str]:
        await trio.lowlevel.checkpoint()
        trace.append("default")
        return ["default"]

    def layer(name: str) -> Callable[..., Awaitable[list[str]]]:
        async def listener(arg: str, next_: Next) -> list[str]:
            trace.append(f"{name} before {arg}")
            inner = await next_()
            trace.append(f"{name} after")
            return [name, *inner]

        return listener

    # A seam whose results the bus leaves to its caller: these are no tool results.
    bus.on("tools/execute", layer("outer"))
    bus.on("tools/execute", layer("inner"))
    result = await bus.waterfall("tools/execute", default, "execution")
    assert result == ["outer", "inner", "default"]
    assert trace == [
        "outer before execution",
        "inner before execution",
        "default",
        "inner after",
        "outer after",
    ]


async def test_waterfall_listener_may_short_circuit() -> None:
    """R6.3: a listener returning without calling ``next`` skips the rest and the default."""
    bus = HookBus()
    reached: list[str] = []

    async def default() -> str:
        reached.append("default")  # pragma: no cover - must never run
        return "default"

    def short(_arg: object, _next: Next) -> str:
        return "short"

    async def later(_arg: object, next_: Next) -> object:
        reached.append("later")  # pragma: no cover - must never run
        return await next_()

    bus.on("tools/execute", short)
    bus.on("tools/execute", later)
    assert await bus.waterfall("tools/execute", default, "execution") == "short"
    assert reached == []


async def test_waterfall_listener_may_wrap_the_result() -> None:
    """R6.3: a listener may delegate and transform what the rest of the chain returned."""
    bus = HookBus()

    async def default() -> int:
        await trio.lowlevel.checkpoint()
        return 20

    async def double(_arg: object, next_: Next) -> int:
        return 2 * await next_()

    async def add_one(_arg: object, next_: Next) -> int:
        return 1 + await next_()

    bus.on("tools/execute", double)
    bus.on("tools/execute", add_one)
    assert await bus.waterfall("tools/execute", default, "execution") == 42


async def test_waterfall_failure_propagates() -> None:
    """R6.3: a raising listener (outer or inner) makes the waterfall raise to the caller."""
    bus = HookBus()

    async def default() -> str:
        await trio.lowlevel.checkpoint()
        return "default"

    async def passthrough(_arg: object, next_: Next) -> object:
        return await next_()

    bus.on("agent/step-result", passthrough)
    bus.on("agent/step-result", boom)
    with pytest.raises(RuntimeError, match="listener failed"):
        await bus.waterfall("agent/step-result", default, "message")


async def test_a_serial_listener_failure_is_named_on_it() -> None:
    """R6.2, R7.45: the error a serial listener raises carries a note naming it, so a turn's
    error (``TurnResult.error``, ``agent/error``) says which plugin failed."""
    bus = HookBus()
    bus.on("agent/pre-step", lambda *_: None)
    bus.on("agent/pre-step", boom)
    with pytest.raises(RuntimeError, match="listener failed") as caught:
        await bus.serial("agent/pre-step", "agent")
    assert caught.value.__notes__ == [
        f"raised by an agent/pre-step listener ({boom.__module__}.boom)"
    ]


async def test_a_waterfall_failure_is_named_on_the_listener_that_raised_it_alone() -> None:
    """R6.3: a listener that lets the rest of its chain's failure through ``next()`` did
    not raise it, and is not named; one that raises its own is."""
    bus = HookBus()
    inner_failure = KeyError("inner")

    async def default() -> str:
        raise LookupError("default")

    async def passthrough(_arg: object, next_: Next) -> object:
        return await next_()

    async def inner(_arg: object, next_: Next) -> object:
        if len(raised) == 1:
            raise inner_failure
        return await next_()

    async def replacing(_arg: object, next_: Next) -> object:
        try:
            return await next_()
        except LookupError as exc:
            raise ValueError("outer") from exc

    raised: list[BaseException] = []
    bus.on("agent/step-result", passthrough)
    bus.on("agent/step-result", inner)
    for _ in range(2):
        with pytest.raises(LookupError) as caught:
            await bus.waterfall("agent/step-result", default, "message")
        raised.append(caught.value)
    assert [getattr(exc, "__notes__", None) for exc in raised] == [
        None,
        [f"raised by an agent/step-result listener ({__name__}.{inner.__qualname__})"],
    ]
    bus.on("agent/step-result", replacing)
    with pytest.raises(ValueError, match="outer") as replaced:
        await bus.waterfall("agent/step-result", default, "message")
    assert replaced.value.__notes__ == [
        f"raised by an agent/step-result listener ({__name__}.{replacing.__qualname__})"
    ]


async def test_waterfall_next_after_the_listener_raised_is_refused() -> None:
    """R6.3: ``next`` runs the rest of the chain only during the listener's call: kept past
    a raise, calling it raises HookError naming the seam and the default never runs."""
    bus = HookBus()
    ran: list[str] = []
    kept: list[Next] = []

    async def default() -> str:
        ran.append("default")  # pragma: no cover - must never run
        return "default"

    def keep_and_fail(_arg: object, next_: Next) -> object:
        kept.append(next_)
        raise RuntimeError("listener failed")

    bus.on("agent/step-result", keep_and_fail)
    with pytest.raises(RuntimeError, match="listener failed"):
        await bus.waterfall("agent/step-result", default, "message")
    with pytest.raises(
        HookError,
        match=(
            rf"^an agent/step-result listener \({__name__}\.{keep_and_fail.__qualname__}\) "
            r"called next\(\) after the listener returned"
        ),
    ):
        await kept[0]()
    assert ran == []


async def test_a_listener_is_named_with_the_article_its_seam_takes() -> None:
    """Errors name a listener as "an agent/... listener" or "a tools/... listener"."""
    bus = HookBus()

    def stop(*_args: object) -> object:
        raise SystemExit(1)

    bus.on("tools/result", stop)
    with pytest.raises(HookError, match=r"^a tools/result listener \("):
        await bus.waterfall_value("tools/result", "value", "value")
    bus.on("agent/request", stop)
    with pytest.raises(HookError, match=r"^an agent/request listener \("):
        await bus.waterfall_value("agent/request", "value", "value")


async def test_waterfall_next_returned_unawaited_is_refused_naming_the_mistake() -> None:
    """R6.3: an async listener that returns ``call_next()`` without awaiting it fails with a
    HookError saying so, and the rest of the chain, never run, is closed: the coroutine is not taken
    for the listener's result, leaving Python to warn of a coroutine of the bus's own never awaited
    (an error under ``-W error``)."""
    bus = HookBus()
    ran: list[str] = []

    async def default() -> str:
        ran.append("default")  # pragma: no cover - must never run
        return "default"

    async def forgets_await(_arg: object, next_: Next) -> object:
        await trio.lowlevel.checkpoint()
        return next_()

    bus.on("agent/step-result", forgets_await)
    with pytest.raises(HookError, match=r"called next\(\) but never awaited what it returned"):
        await bus.waterfall("agent/step-result", default, "message")
    assert ran == []


async def test_waterfall_next_called_and_dropped_is_refused() -> None:
    """R6.3: a listener that calls ``call_next()``, never awaits it and returns a value of its own
    fails with a HookError, so the rest of the chain (a tool's body, say) is not asked for to
    silently never run, with Python warning of the bus's coroutine instead."""
    bus = HookBus()
    ran: list[str] = []

    async def default() -> str:
        ran.append("default")  # pragma: no cover - must never run
        return "default"

    async def drops(_arg: object, next_: Next) -> object:
        next_()  # type: ignore[unused-awaitable]
        await trio.lowlevel.checkpoint()
        return "mine"

    bus.on("agent/step-result", drops)
    with pytest.raises(HookError, match=r"called next\(\) but never awaited what it returned"):
        await bus.waterfall("agent/step-result", default, "message")
    assert ran == []


async def test_waterfall_sync_listener_may_return_next_for_the_bus_to_await() -> None:
    """R6.3: a plain-function listener delegates by returning ``call_next()``."""
    bus = HookBus()

    async def default() -> str:
        await trio.lowlevel.checkpoint()
        return "default"

    bus.on("tools/execute", lambda _arg, next_: next_())
    assert await bus.waterfall("tools/execute", default, "execution") == "default"


async def test_a_waterfall_of_four_hundred_listeners_nests_within_the_recursion_limit() -> None:
    """R6.3, docs/hooks.md: each listener of a chain runs inside the one before it, a coroutine of
    its own and one of the bus's, so 400 of them fit within Python's default limit of 1000 frames; a
    third frame per listener would end the dispatch with RecursionError at about 330."""
    bus = HookBus()
    # Relative to the limit, should a plugin of the test run raise it.
    listeners = sys.getrecursionlimit() * 2 // 5

    async def passing_on(_execution: object, call_next: Next) -> object:
        return await call_next()

    async def default() -> str:
        await trio.lowlevel.checkpoint()
        return "default"

    for _ in range(listeners):
        bus.on("tools/execute", passing_on)
    assert await bus.waterfall("tools/execute", default, "execution") == "default"


# -- parallel ------------------------------------------------------------------------------------


async def test_parallel_runs_listeners_concurrently_and_waits_for_all(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4: every listener starts before any finishes; the dispatch returns when all are done."""
    bus = HookBus()
    started: list[str] = []
    finished: list[str] = []

    def listener(name: str, seconds: float) -> Callable[..., Awaitable[None]]:
        async def run(*_args: object) -> None:
            started.append(name)
            await trio.sleep(seconds)
            finished.append(name)

        return run

    bus.on("session/flush", listener("a", 3))
    bus.on("session/flush", listener("b", 1))
    before = trio.current_time()
    with trio.fail_after(DEADLINE):
        await bus.parallel("session/flush", "agent", "session")
    assert trio.current_time() - before == 3
    assert sorted(started) == ["a", "b"]
    assert finished == ["b", "a"]


async def test_parallel_failure_rejects_the_dispatch_after_the_others_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4: a failing listener rejects the dispatch; the other listeners are not cancelled."""
    bus = HookBus()
    finished: list[str] = []

    async def slow(*_args: object) -> None:
        await trio.sleep(2)
        finished.append("slow")

    async def failing(*_args: object) -> None:
        await trio.sleep(1)
        raise OSError("disk full")

    bus.on("session/flush", slow)
    bus.on("session/flush", failing)
    with trio.fail_after(DEADLINE), pytest.raises(OSError, match="disk full"):
        await bus.parallel("session/flush", "agent", "session")
    assert finished == ["slow"]


async def test_parallel_logs_the_failures_it_does_not_raise(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R6.4: one failure is raised, naming its seam; every other one is logged, not lost."""
    bus = HookBus()

    async def first(*_args: object) -> None:
        raise ValueError("first broke")

    async def second(*_args: object) -> None:
        await trio.sleep(1)
        raise KeyError("second broke")

    bus.on("session/flush", first)
    bus.on("session/flush", second)
    with (
        trio.fail_after(DEADLINE),
        caplog.at_level(logging.ERROR, logger="retinue.hooks"),
        pytest.raises(ValueError, match="first broke") as raised,
    ):
        await bus.parallel("session/flush", "agent", "session")
    assert any("session/flush listener" in note for note in raised.value.__notes__)
    logged = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert [type(exc) for exc in logged] == [KeyError]
    assert "not raised: another listener's failure was" in caplog.records[0].getMessage()


async def test_parallel_raises_the_failure_of_the_listener_registered_first(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R6.4: of failures that come together, the dispatch raises the first-registered
    listener's every time, whatever order trio runs the listeners in; the other is logged."""
    bus = HookBus()

    async def registered_first(*_args: object) -> None:
        await trio.sleep(1)
        raise ValueError("first registered")

    async def registered_second(*_args: object) -> None:
        await trio.sleep(1)
        raise KeyError("second registered")

    bus.on("session/flush", registered_first)
    bus.on("session/flush", registered_second)
    with trio.fail_after(DEADLINE), caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        for _ in range(20):
            with pytest.raises(ValueError, match="first registered"):
                await bus.parallel("session/flush", "agent", "session")
    logged = [type(r.exc_info[1]) for r in caplog.records if r.exc_info]
    assert logged == [KeyError] * 20


async def test_a_parallel_listeners_stop_iteration_is_raised_named_as_its_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4, docs/hooks.md: the failure a parallel dispatch raises has a note naming its
    listener, a ``StopIteration`` made into a ``RuntimeError`` too."""
    bus = HookBus()

    async def stopper(*_args: object) -> None:
        await trio.lowlevel.checkpoint()
        raise StopIteration

    bus.on("session/flush", stopper)
    with trio.fail_after(DEADLINE), pytest.raises(RuntimeError) as raised:
        await bus.parallel("session/flush", "agent", "session")
    assert raised.value.__notes__ == [
        f"raised by a session/flush listener ({__name__}.{stopper.__qualname__})"
    ]


async def test_a_parallel_listener_raising_one_error_object_is_named_on_it_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4: the note naming the listener is added once. A listener that raised the
    same error object on every dispatch gave it one more note each time, without bound."""
    bus = HookBus()
    down = ConnectionError("backup service down")

    async def backup(*_args: object) -> None:
        await trio.lowlevel.checkpoint()
        raise down

    bus.on("session/flush", backup)
    with trio.fail_after(DEADLINE):
        for _ in range(3):
            with pytest.raises(ConnectionError):
                await bus.parallel("session/flush", "agent", "session")
    assert len(down.__notes__) == 1
    assert "session/flush listener" in down.__notes__[0]


async def test_a_parallel_listener_error_whose_notes_are_no_list_is_raised_as_it_is(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R6.4: a listener's error whose ``__notes__`` is no list is the failure the dispatch raises,
    the others logged as unraised failures, not a TypeError of the bus's own from adding the note,
    raised in its place, with every other failure logged as cut by a cancel."""
    bus = HookBus()

    async def odd(*_args: object) -> None:
        error = ValueError("odd notes")
        error.__notes__ = ("set by the listener",)  # type: ignore[assignment]
        raise error

    async def later(*_args: object) -> None:
        await trio.sleep(1)
        raise KeyError("later")

    bus.on("session/flush", odd)
    bus.on("session/flush", later)
    with (
        trio.fail_after(DEADLINE),
        caplog.at_level(logging.ERROR, logger="retinue.hooks"),
        pytest.raises(ValueError, match="odd notes"),
    ):
        await bus.parallel("session/flush", "agent", "session")
    assert "not raised: another listener's failure was" in caplog.records[0].getMessage()


async def test_a_parallel_dispatch_cut_by_a_deadline_logs_the_failures_it_collected(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R6.4: a listener that failed before a deadline cancelled the dispatch is logged."""
    bus = HookBus()

    async def broken(*_args: object) -> None:
        raise ValueError("broke early")

    async def hangs(*_args: object) -> None:
        await trio.sleep_forever()

    bus.on("session/flush", broken)
    bus.on("session/flush", hangs)
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        with trio.move_on_after(5):
            await bus.parallel("session/flush", "agent", "session")
    assert [type(r.exc_info[1]) for r in caplog.records if r.exc_info] == [ValueError]


async def test_a_parallel_dispatch_cancelled_from_outside_raises_a_bare_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4: a cancel propagates out of parallel as it does out of serial, not grouped: no
    BaseExceptionGroup of every child's Cancelled, which an ``except trio.Cancelled`` around the
    dispatch would miss.
    """
    bus = HookBus()

    async def slow(*args: object) -> None:
        await trio.sleep(10)

    bus.on("session/flush", slow)
    bus.on("session/flush", slow)
    cancels: list[BaseException] = []
    with trio.fail_after(DEADLINE), trio.move_on_after(1) as scope:
        try:
            await bus.parallel("session/flush", "agent", "session")
        except trio.Cancelled as cancel:
            cancels.append(cancel)
            raise
    assert scope.cancelled_caught
    assert len(cancels) == 1


async def test_ctrl_c_in_a_parallel_listener_passes_on_bare(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4: Ctrl-C in one listener reaches the dispatch's caller as a KeyboardInterrupt, not
    wrapped in the nursery's BaseExceptionGroup; the other listeners are cancelled.
    """
    bus = HookBus()

    async def slow(*args: object) -> None:
        await trio.sleep(10)

    async def interrupted(*args: object) -> None:
        await trio.sleep(1)
        raise KeyboardInterrupt

    bus.on("session/flush", slow)
    bus.on("session/flush", interrupted)
    # Caught as any BaseException: a grouped Ctrl-C escaping the test would end the test run.
    with trio.fail_after(DEADLINE), pytest.raises(BaseException) as raised:
        await bus.parallel("session/flush", "agent", "session")
    assert type(raised.value) is KeyboardInterrupt


@pytest.mark.filterwarnings("ignore::trio.TrioDeprecationWarning")
def test_a_parallel_dispatch_cancelled_under_loose_groups_logs_the_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A listener's failure a cancelled parallel dispatch does not raise is logged under trio's
    loose exception groups too, where the nursery raises the cancel bare: it is not left unsaid
    there."""

    async def main() -> None:
        bus = HookBus()

        async def failing(*_args: object) -> None:
            raise ValueError("listener failed")

        async def slow(*_args: object) -> None:
            await trio.sleep(10)

        bus.on("session/flush", failing)
        bus.on("session/flush", slow)
        with trio.move_on_after(1) as scope:
            await bus.parallel("session/flush", None, None)
        assert scope.cancelled_caught

    trio.run(
        main, clock=trio.testing.MockClock(autojump_threshold=0), strict_exception_groups=False
    )
    assert "listener failed" in caplog.text
    assert "the dispatch was cancelled" in caplog.text
