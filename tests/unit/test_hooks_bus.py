"""The event bus dispatch modes (SPEC 6.1, R6.1-R6.5; DESIGN 5: every emit failure is contained)."""

from __future__ import annotations

import functools
import logging
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any
from unittest.mock import AsyncMock

import pytest
import trio
import trio.testing

from retinue._errors import HookError
from retinue.hooks import SEAMS, HookBus, SeamName
from retinue.supervisors import RuntimeHooks
from tests.helpers import DEADLINE

Next = Callable[[], Awaitable[Any]]


class Handle:
    """Something with an ``id``, like an agent."""

    def __init__(self, agent_id: str) -> None:
        self.id = agent_id


def boom(*_args: object) -> None:
    raise RuntimeError("listener failed")


# -- emit ----------------------------------------------------------------------------------------


def test_emit_calls_every_listener_and_contains_failures(caplog: pytest.LogCaptureFixture) -> None:
    """R6.1: a raising notification listener is logged; the others still run; emit never raises."""
    bus = HookBus()
    calls: list[tuple[str, tuple[object, ...]]] = []
    bus.on("agent/status", lambda *args: calls.append(("first", args)))
    bus.on("agent/status", boom)
    bus.on("agent/status", lambda *args: calls.append(("third", args)))
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        bus.emit("agent/status", "agent", "idle")
    assert calls == [("first", ("agent", "idle")), ("third", ("agent", "idle"))]
    assert "agent/status" in caplog.text


def test_emit_contains_an_async_listener_without_leaking_a_coroutine() -> None:
    """R6.1: emit is synchronous; a coroutine a listener returns is closed unrun (contained)."""
    bus = HookBus()
    ran: list[str] = []

    async def listener(*_args: object) -> None:
        ran.append("async")  # pragma: no cover - must never run

    def starts(*args: object) -> Awaitable[None]:
        return listener(*args)  # a plain function handing back a coroutine

    bus.on("agent/created", starts)
    bus.on("agent/created", lambda *_: ran.append("sync"))
    bus.emit("agent/created", "agent")
    assert ran == ["sync"]


@pytest.mark.parametrize("seam", ["agent/created", "session/event"])
def test_an_async_listener_of_an_emit_seam_is_refused_when_registered(seam: str) -> None:
    """R6.1: emit seams call listeners synchronously; an async one would never run."""
    bus = HookBus()

    async def listener(*_args: object) -> None:
        pass  # pragma: no cover - never registered

    with pytest.raises(TypeError, match="synchronously"):
        bus.on(seam, listener)
    assert not bus.has_listeners(seam)


class AsyncObserver:
    """A listener object whose ``__call__`` is ``async def``."""

    async def __call__(self, *_args: object) -> None:
        pass  # pragma: no cover - never registered


@pytest.mark.parametrize(
    "listener",
    [AsyncObserver(), functools.partial(AsyncObserver())],
    ids=["async-call-method", "partial-of-it"],
)
def test_an_object_with_an_async_call_method_is_refused_by_an_emit_seam(
    listener: Callable[..., object],
) -> None:
    """R6.1: an object whose ``__call__`` is ``async def`` gives a coroutine that an emit seam
    would close unrun at every dispatch: refused when registered, like an ``async def``
    function (and as a watcher)."""
    bus = HookBus()
    with pytest.raises(TypeError, match="synchronously"):
        bus.on("agent/created", listener)
    assert not bus.has_listeners("agent/created")
    with pytest.raises(TypeError, match="synchronously"):
        bus.watch("agent/created", typing.cast("Callable[[], None]", listener))


@pytest.mark.parametrize(
    "listener",
    [AsyncMock(), functools.partial(AsyncMock())],
    ids=["async-mock", "partial-of-it"],
)
def test_an_async_mock_is_refused_by_an_emit_seam(listener: Callable[..., object]) -> None:
    """R6.1: ``unittest.mock.AsyncMock`` is a coroutine function by its own mark, not by its
    class's ``__call__``; each dispatch would close its coroutine unrun, so an emit seam
    refuses it when registered (and as a watcher)."""
    bus = HookBus()
    with pytest.raises(TypeError, match="synchronously"):
        bus.on("agent/created", listener)
    assert not bus.has_listeners("agent/created")
    with pytest.raises(TypeError, match="synchronously"):
        bus.watch("agent/created", typing.cast("Callable[[], None]", listener))


class SyncObserver:
    """A listener object whose ``__call__`` is a plain method."""

    def __init__(self) -> None:
        self.heard: list[tuple[object, ...]] = []

    def __call__(self, *args: object) -> None:
        self.heard.append(args)


def test_an_object_with_a_sync_call_method_listens_to_an_emit_seam() -> None:
    """R6.1: only an async ``__call__`` is refused; an object called synchronously is a
    listener (and a watcher) like a plain function, with or without a partial around it."""
    bus = HookBus()
    observer = SyncObserver()
    bus.on("agent/created", observer)
    bus.on("agent/created", functools.partial(observer, "bound"))
    bus.watch("agent/created", observer)
    bus.emit("agent/created", "agent")
    assert observer.heard == [(), ("agent",), ("bound", "agent")]


def test_session_event_refuses_a_coroutine_returned_by_a_listener() -> None:
    """R4.8: the session/event feed raises, and closes, a coroutine nobody would run."""
    bus = HookBus()

    async def listener(*_args: object) -> None:
        pass  # pragma: no cover - must never run

    def starts(*args: object) -> Awaitable[None]:
        return listener(*args)  # a plain function handing back a coroutine

    bus.on("session/event", starts)
    with pytest.raises(TypeError, match="synchronous"):
        bus.emit_raising("session/event", "session", "event")


def test_seam_name_and_the_typed_listeners_of_rt_hooks_cover_every_seam() -> None:
    """R6.5: ``SeamName`` lists the seams of ``SEAMS`` in order, and ``rt.hooks.on`` types a
    listener for each of them, once: a seam added to one and not the others fails here."""
    assert typing.get_args(SeamName) == tuple(SEAMS)
    typed = [
        name
        for overload in typing.get_overloads(RuntimeHooks.on)
        for name in re.findall(r"['\"]([^'\"]+)['\"]", overload.__annotations__["name"])
    ]
    assert sorted(typed) == sorted(SEAMS)


def test_an_unknown_seam_name_is_refused_with_the_closest_seam() -> None:
    """R6.5: a listener for a name no seam dispatches would never run: refused, with a hint."""
    bus = HookBus()
    with pytest.raises(ValueError, match="'tools/pre-execute'"):
        bus.on("tools/pre_execute", lambda *_: None)
    assert not bus.has_listeners("tools/pre_execute")


def test_emit_raising_runs_all_listeners_then_raises_the_first_failure() -> None:
    """R4.8: the session/event feed surfaces the first failure after every observer ran."""
    bus = HookBus()
    ran: list[str] = []

    def first(*_args: object) -> None:
        ran.append("first")
        raise ValueError("first failure")

    def second(*_args: object) -> None:
        ran.append("second")
        raise KeyError("second failure")

    bus.on("session/event", first)
    bus.on("session/event", second)
    bus.on("session/event", lambda *_: ran.append("third"))
    with pytest.raises(ValueError, match="first failure"):
        bus.emit_raising("session/event", "session", "event")
    assert ran == ["first", "second", "third"]


def test_emit_raising_logs_the_failures_it_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R4.8: one failure propagates; a later listener's is logged, naming the seam, not lost
    (as a parallel dispatch logs the failures it does not raise)."""
    bus = HookBus()
    bus.on("session/event", boom)
    table: dict[str, int] = {}
    bus.on("session/event", lambda *_: table["missing key"])
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"), pytest.raises(RuntimeError):
        bus.emit_raising("session/event", "session", "event")
    (record,) = caplog.records
    assert "session/event" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], KeyError)


def test_emit_without_listeners_is_a_no_op() -> None:
    """R6.1: nothing registered, nothing happens."""
    bus = HookBus()
    bus.emit("agent/status", "x")
    bus.emit_raising("session/event", "x")
    assert not bus.has_listeners("agent/status")


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


@pytest.mark.parametrize("falsy", [False, 0, "", []])
async def test_strict_serial_first_non_none_result_ends_the_chain(falsy: object) -> None:
    """R6.2, R7.37: ``None`` abstains; the first other value (even a falsy one) wins and stops the chain."""
    bus = HookBus()
    ran: list[str] = []

    def abstain(*_args: object) -> None:
        ran.append("abstain")

    async def decide(*_args: object) -> object:
        await trio.lowlevel.checkpoint()
        ran.append("decide")
        return falsy

    bus.on("agent/turn-stop", abstain)
    bus.on("agent/turn-stop", decide)
    bus.on("agent/turn-stop", lambda *_: ran.append("never"))
    assert await bus.strict_serial("agent/turn-stop", "agent", 1) == falsy
    assert ran == ["abstain", "decide"]


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

    bus.on("tools/pre-execute", layer("outer"))
    bus.on("tools/pre-execute", layer("inner"))
    result = await bus.waterfall("tools/pre-execute", default, "exec")
    assert result == ["outer", "inner", "default"]
    assert trace == [
        "outer before exec",
        "inner before exec",
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

    bus.on("agent/prompt-submit", short)
    bus.on("agent/prompt-submit", later)
    assert await bus.waterfall("agent/prompt-submit", default, "prompt") == "short"
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

    bus.on("agent/request", double)
    bus.on("agent/request", add_one)
    assert await bus.waterfall("agent/request", default, "config") == 42


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
        HookError, match=r"agent/step-result listener called next\(\) after the listener returned"
    ):
        await kept[0]()
    assert ran == []


async def test_waterfall_next_returned_unawaited_is_refused_naming_the_mistake() -> None:
    """R6.3: an async listener that returns ``call_next()`` without awaiting it fails
    with a HookError saying so, and the rest of the chain, never run, is closed: it was
    taken for the listener's result, and Python warned of a coroutine of the bus's own
    never awaited (an error under ``-W error``)."""
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
    """R6.3: a listener that calls ``call_next()``, never awaits it and returns a value of
    its own fails with a HookError: the rest of the chain (a tool's body, say) was asked
    for and silently never ran, and Python warned of the bus's coroutine instead."""
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

    bus.on("agent/step-result", lambda _arg, next_: next_())
    assert await bus.waterfall("agent/step-result", default, "message") == "default"


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


# -- scoping and (un)registration ----------------------------------------------------------------


async def test_scoped_listeners_hear_only_their_agent() -> None:
    """R6.5: an agent-scoped listener hears its agent's dispatches; a global one hears all."""
    bus = HookBus()
    heard: list[tuple[str, object]] = []
    bus.on("agent/status", lambda *a: heard.append(("global", a[-1])))
    bus.on("agent/status", lambda *a: heard.append(("a", a[-1])), agent=Handle("a"))
    bus.on("agent/status", lambda *a: heard.append(("b", a[-1])), agent="b")
    bus.emit("agent/status", "x", 1, scope="a")
    bus.emit("agent/status", "x", 2, scope="b")
    bus.emit("agent/status", "x", 3)
    assert heard == [("global", 1), ("a", 1), ("global", 2), ("b", 2), ("global", 3)]

    async def default() -> list[str]:
        await trio.lowlevel.checkpoint()
        return []

    async def tag(_arg: object, next_: Next) -> list[str]:
        return ["a-only", *await next_()]

    bus.on("agent/request", tag, agent="a")
    assert await bus.waterfall("agent/request", default, "cfg", scope="a") == ["a-only"]
    assert await bus.waterfall("agent/request", default, "cfg", scope="b") == []
    assert bus.listeners("agent/status", "a") != bus.listeners("agent/status", "b")


def test_a_bus_given_bus_of_refuses_a_handle_whose_agent_dispatches_elsewhere() -> None:
    """R6.5: a handle whose agent dispatches on another bus is refused before anything is
    registered: scoped by its id, the listener would never hear that agent. A handle of
    its own bus, one it does not know, or an id (whatever it names) is taken."""
    elsewhere = HookBus()
    buses: dict[str, HookBus] = {"theirs": elsewhere}
    bus = HookBus(bus_of=lambda handle: buses.get(getattr(handle, "id", "")))
    buses["ours"] = bus
    with pytest.raises(ValueError, match=r"^agent 'theirs' belongs to another runtime$"):
        bus.on("agent/status", lambda *_: None, agent=Handle("theirs"))
    assert not bus.has_listeners("agent/status")
    for agent in (Handle("ours"), Handle("unknown"), "theirs"):
        bus.on("agent/status", lambda *_: None, agent=agent)
    assert all(bus.hears("agent/status", scope) for scope in ("ours", "unknown", "theirs"))


def test_unregister_during_dispatch_affects_only_later_dispatches() -> None:
    """R6.5 / DESIGN 17: lists are copied before dispatch; (un)registering mid-dispatch is safe."""
    bus = HookBus()
    calls: list[str] = []
    removers: dict[str, Callable[[], None]] = {}

    def first(*_args: object) -> None:
        calls.append("first")
        removers["second"]()
        removers["added"] = bus.on("agent/status", lambda *_: calls.append("added"))

    def second(*_args: object) -> None:
        calls.append("second")

    removers["first"] = bus.on("agent/status", first)
    removers["second"] = bus.on("agent/status", second)
    bus.emit("agent/status", "agent", "idle")
    assert calls == ["first", "second"]
    calls.clear()
    removers["first"]()
    bus.emit("agent/status", "agent", "idle")
    assert calls == ["added"]


async def test_unregister_during_waterfall_keeps_the_running_chain() -> None:
    """R6.3, R6.5: a listener removing a later one mid-waterfall does not break the running chain."""
    bus = HookBus()
    trace: list[str] = []
    removers: list[Callable[[], None]] = []

    async def default() -> str:
        await trio.lowlevel.checkpoint()
        return "default"

    async def remover(_arg: object, next_: Next) -> object:
        for remove in removers:
            remove()
        return await next_()

    async def later(_arg: object, next_: Next) -> object:
        trace.append("later")
        return await next_()

    bus.on("tools/execute", remover)
    removers.append(bus.on("tools/execute", later))
    assert await bus.waterfall("tools/execute", default, "exec") == "default"
    assert trace == ["later"]
    trace.clear()
    assert await bus.waterfall("tools/execute", default, "exec") == "default"
    assert trace == []


def test_unregister_is_idempotent_and_forgets_an_empty_seam() -> None:
    """R6.5: calling an unregister function twice is harmless; the seam has no listeners after."""
    bus = HookBus()
    remove = bus.on("agent/queued", lambda *_: None)
    assert bus.has_listeners("agent/queued")
    remove()
    remove()
    assert not bus.has_listeners("agent/queued")
    assert bus.listeners("agent/queued") == []


def test_same_function_registered_twice_runs_twice_and_unregisters_separately() -> None:
    """R6.5: each registration is its own entry."""
    bus = HookBus()
    calls: list[int] = []

    def listener(*_args: object) -> None:
        calls.append(1)

    remove_one = bus.on("agent/status", listener)
    bus.on("agent/status", listener)
    bus.emit("agent/status", "a", "idle")
    assert calls == [1, 1]
    remove_one()
    bus.emit("agent/status", "a", "idle")
    assert calls == [1, 1, 1]


# -- watch ---------------------------------------------------------------------------------------


def test_watch_reports_the_first_listener_and_the_last_removal() -> None:
    """A watcher is called at once and on every change of whether a seam has listeners."""
    bus = HookBus()
    seen: list[bool] = []
    unwatch = bus.watch("session/event", lambda: seen.append(bus.has_listeners("session/event")))
    first = bus.on("session/event", lambda *_: None)
    second = bus.on("session/event", lambda *_: None, agent="a")
    bus.on("agent/error", lambda *_: None)
    first()
    assert seen == [False, True]
    bus.drop_scope("a")
    assert seen == [False, True, False]
    unwatch()
    bus.on("session/event", lambda *_: None)
    second()
    assert seen == [False, True, False]


def test_a_raising_watcher_neither_undoes_a_registration_nor_stops_a_scope_drop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A watcher's failure is logged and contained: ``on`` returns its unregister function
    and ``drop_scope`` (an agent's teardown) removes every listener of the scope."""
    bus = HookBus()
    broken = False

    def watcher() -> None:
        if broken:
            raise RuntimeError("watcher bug")

    bus.watch("tools/result", watcher)
    bus.watch("agent/status", watcher)
    broken = True
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        unregister = bus.on("agent/status", lambda *_: None, agent="a")
        bus.on("tools/result", lambda *_: None, agent="a")
        bus.drop_scope("a")
    assert not bus.has_listeners("agent/status")
    assert not bus.has_listeners("tools/result")
    unregister()
    assert sum("watcher bug" in str(r.exc_info[1]) for r in caplog.records if r.exc_info) == 4


def test_a_listener_that_is_not_callable_is_refused_when_registered() -> None:
    """R6.1: the mistake is reported at ``on``, naming the seam, not at some later dispatch."""
    with pytest.raises(TypeError, match="agent/pre-step listeners must be callable"):
        HookBus().on("agent/pre-step", "not callable")  # type: ignore[arg-type]


def test_hears_answers_for_one_scope_what_its_dispatch_would_reach() -> None:
    """R6.5: another agent's scoped listener is not heard by this agent; an unscoped one is."""
    bus = HookBus()
    assert not bus.hears("agent/pre-step", "a")
    remove = bus.on("agent/pre-step", lambda *_: None, agent="b")
    assert bus.has_listeners("agent/pre-step")
    assert (bus.hears("agent/pre-step", "a"), bus.hears("agent/pre-step", "b")) == (False, True)
    remove()
    bus.on("agent/pre-step", lambda *_: None)
    assert bus.hears("agent/pre-step", "a")


def test_shared_and_scoped_listeners_run_in_registration_order() -> None:
    """R6.5: an agent's own listeners and the shared ones interleave as they were registered."""
    bus = HookBus()
    heard: list[str] = []
    for label, scope in [("s1", None), ("a1", "a"), ("b1", "b"), ("s2", None), ("a2", "a")]:
        bus.on("agent/status", lambda *_, label=label: heard.append(label), agent=scope)
    bus.emit("agent/status", "x", scope="a")
    bus.emit("agent/status", "x", scope="b")
    bus.emit("agent/status", "x")
    assert heard == ["s1", "a1", "s2", "a2", "s1", "b1", "s2", "s1", "s2"]


def test_dropping_a_scope_leaves_the_others_and_a_later_agent_of_that_id_starts_clean() -> None:
    """R12.9: an agent's teardown removes its listeners only; an old unregister touches nothing new."""
    bus = HookBus()
    heard: list[str] = []
    old = bus.on("agent/status", lambda *_: heard.append("old a"), agent="a")
    bus.on("agent/status", lambda *_: heard.append("b"), agent="b")
    bus.on("tools/result", lambda *_: heard.append("a tools"), agent="a")
    bus.drop_scope("a")
    assert not bus.has_listeners("tools/result")
    assert not bus.hears("agent/status", "a")
    bus.on("agent/status", lambda *_: heard.append("new a"), agent="a")
    old()
    bus.emit("agent/status", "x", scope="a")
    bus.emit("agent/status", "x", scope="b")
    assert heard == ["new a", "b"]


def test_dropping_a_scope_removes_a_listener_whose_sibling_was_unregistered() -> None:
    """R6.5 / R12.9: unregistering one of an agent's listeners on a seam leaves the seam among
    those its teardown visits, so the other one is removed there too."""
    bus = HookBus()
    heard: list[str] = []
    first = bus.on("agent/status", lambda *_: heard.append("first"), agent="a")
    bus.on("agent/status", lambda *_: heard.append("second"), agent="a")
    bus.on("agent/status", lambda *_: heard.append("shared"))
    first()
    bus.drop_scope("a")
    bus.emit("agent/status", "x", scope="a")
    assert heard == ["shared"]
    assert bus.listeners("agent/status", "a") == bus.listeners("agent/status")


async def test_a_cancel_reaching_a_listener_stays_a_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40: a cancel of a scope around the dispatch passes through listeners as itself,
    in every awaited mode; only a listener's own stray Cancelled becomes a HookError."""
    bus = HookBus()

    async def sleeper(*_args: object) -> None:
        await trio.sleep_forever()

    for name in ("agent/pre-step", "agent/turn-stop", "agent/request", "session/flush"):
        bus.on(name, sleeper)
    dispatches: list[Callable[[], Awaitable[object]]] = [
        lambda: bus.serial("agent/pre-step"),
        lambda: bus.strict_serial("agent/turn-stop"),
        lambda: bus.waterfall_value("agent/request", 1),
        lambda: bus.parallel("session/flush"),
    ]
    with trio.fail_after(DEADLINE):
        for dispatch in dispatches:
            with trio.move_on_after(1) as scope:
                await dispatch()
            assert scope.cancelled_caught


async def test_a_synchronous_listener_never_holds_a_real_cancel() -> None:
    """R4.8: trio delivers no cancel to synchronous code, so a Cancelled a synchronous
    listener raises is its own, even while a scope around the emit is cancelled:
    contained by emit, a HookError from emit_raising, never a cancel of the caller."""
    bus = HookBus()
    stored: list[trio.Cancelled] = []
    with trio.CancelScope() as own:
        own.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            stored.append(exc)

    def raise_stored(*_args: object) -> None:
        raise stored[0]

    bus.on("agent/status", raise_stored)
    bus.on("session/event", raise_stored)
    with trio.CancelScope() as outer:  # noqa: ASYNC100 - cancelled, and no checkpoint inside on purpose
        outer.cancel()
        bus.emit("agent/status", None, "idle")
        with pytest.raises(HookError) as caught:
            bus.emit_raising("session/event", None, None)
    assert caught.value.code == "STRAY_CANCELLED"
