"""The event bus's emit seams (SPEC 6.1, R6.1; DESIGN 5: every emit failure is contained)."""

from __future__ import annotations

import functools
import logging
import re
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from unittest.mock import AsyncMock

import pytest

from retinue.hooks import SEAMS, HookBus, SeamName
from retinue.hooks._calls import a_listener_of
from retinue.supervisors import RuntimeHooks
from tests.helpers import boom

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


def test_a_contained_emit_failure_names_its_listener_and_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R6.1: the log of a contained failure says which listener raised, for which agent."""
    bus = HookBus()
    bus.on("agent/status", boom)
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        bus.emit("agent/status", "agent", "idle", scope="worker-7")
        bus.emit("agent/status", "agent", "idle")
    assert [record.getMessage() for record in caplog.records] == [
        f"an agent/status listener ({boom.__module__}.boom) failed for agent 'worker-7' (contained)",
        f"an agent/status listener ({boom.__module__}.boom) failed (contained)",
    ]


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


class GeneratorObserver:
    """A listener object whose ``__call__`` is a generator function."""

    def __call__(self, *_args: object) -> Iterator[None]:
        yield  # pragma: no cover - never registered


async def _async_generator_listener(*_args: object) -> AsyncIterator[None]:
    yield  # pragma: no cover - never registered


def _generator_listener(*_args: object) -> Iterator[None]:
    yield  # pragma: no cover - never registered


def _generator_listener_of_a_key(_key: str, *_args: object) -> Iterator[None]:
    yield  # pragma: no cover - never registered


async def _alert(_key: str, *_args: object) -> None:
    pass  # pragma: no cover - never registered


@pytest.mark.parametrize(
    ("seam", "listener", "refusal"),
    [
        (
            "agent/created",
            functools.partial(_alert, "sk-secret"),
            (
                "agent/created listeners are called synchronously: "
                "tests.unit.test_hooks_bus._alert is async"
            ),
        ),
        (
            "agent/request",
            functools.partial(_generator_listener_of_a_key, "sk-secret"),
            (
                "agent/request listeners are called, not iterated: "
                "tests.unit.test_hooks_bus._generator_listener_of_a_key is a generator function"
            ),
        ),
    ],
    ids=["async on an emit seam", "generator"],
)
def test_a_refused_listener_is_named_by_its_code_not_by_its_arguments(
    seam: str, listener: Callable[..., object], refusal: str
) -> None:
    """R6.1, docs/hooks.md: a listener refused when registered is named as a listener's
    error names it, by its qualified name: a partial's repr would show its arguments,
    which may hold a credential, and a function's its address."""
    bus = HookBus()
    with pytest.raises(TypeError) as refused:
        bus.on(seam, listener)
    assert str(refused.value) == refusal


@pytest.mark.parametrize("seam", ["agent/status", "agent/pre-step", "session/flush"])
@pytest.mark.parametrize(
    "listener",
    [
        _async_generator_listener,
        _generator_listener,
        GeneratorObserver(),
        functools.partial(_async_generator_listener, "bound"),
    ],
    ids=["async-generator", "generator", "generator-call-method", "partial-of-one"],
)
def test_a_generator_function_is_refused_as_a_listener_of_any_seam(
    seam: str, listener: Callable[..., object]
) -> None:
    """R6.1, R6.2, R6.4: a generator function called by a dispatch only makes a generator,
    which the bus drops: its body would never run, on any seam, and nothing would say so.
    Refused when registered (and as a watcher), as trio refuses one to ``start_soon``."""
    bus = HookBus()
    with pytest.raises(TypeError, match="called, not iterated"):
        bus.on(seam, listener)
    assert not bus.has_listeners(seam)
    with pytest.raises(TypeError, match="called, not iterated"):
        bus.watch(seam, typing.cast("Callable[[], None]", listener))


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
    assert not bus.has_listeners("tools/pre-execute")


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


def test_emit_raising_logs_the_failures_before_a_ctrl_c(caplog: pytest.LogCaptureFixture) -> None:
    """R4.8: Ctrl-C in a later listener passes on at once, and an earlier failure is logged rather
    than neither raised nor logged.
    """
    bus = HookBus()
    table: dict[str, int] = {}
    bus.on("session/event", lambda *_: table["missing key"])

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    bus.on("session/event", interrupted)
    # Caught as any BaseException: a Ctrl-C escaping the test would end the test run.
    with (
        caplog.at_level(logging.ERROR, logger="retinue.hooks"),
        pytest.raises(BaseException) as raised,
    ):
        bus.emit_raising("session/event", "session", "event")
    assert type(raised.value) is KeyboardInterrupt
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


async def _exhausted_async(*_args: object) -> object:
    return next(iter(()))


@pytest.mark.parametrize("mode", ["serial", "waterfall"])
async def test_an_async_listener_raising_stop_iteration_is_named(mode: str) -> None:
    """R6.2, R7.45: an async listener's StopIteration names the listener, as a sync one's does,
    not Python's "coroutine raised StopIteration", which says nothing of whose it was."""
    bus = HookBus()
    name = "agent/pre-step" if mode == "serial" else "tools/post-execute"
    bus.on(name, _exhausted_async)

    async def accept() -> object:
        raise AssertionError("the listener never calls next()")

    async def dispatch() -> object:
        if mode == "serial":
            await bus.serial(name, "execution")
            return None
        return await bus.waterfall(name, accept, "execution", "result")

    named = f"{a_listener_of(name)} ({__name__}._exhausted_async) raised StopIteration"
    with pytest.raises(RuntimeError, match=re.escape(named)) as raised:
        await dispatch()
    assert isinstance(raised.value.__cause__, StopIteration)


async def _own_runtime_error(*_args: object) -> object:
    try:
        return next(iter(()))
    except StopIteration as exc:
        raise RuntimeError("coroutine raised StopIteration") from exc


async def _stop_iteration_helper() -> None:
    raise StopIteration


async def _own_runtime_error_of_a_helpers_stop(*_args: object) -> object:
    try:
        await _stop_iteration_helper()
    except RuntimeError as exc:
        raise RuntimeError("my own text") from exc.__cause__
    return None


@pytest.mark.parametrize(
    ("listener", "text"),
    [
        (_own_runtime_error, "coroutine raised StopIteration"),
        (_own_runtime_error_of_a_helpers_stop, "my own text"),
    ],
)
async def test_an_async_listeners_own_runtime_error_from_a_stop_iteration_passes_as_it_is(
    listener: Callable[..., Awaitable[object]], text: str
) -> None:
    """R6.2: a RuntimeError an async listener raises itself from a StopIteration is its own
    error, raised as it is: whatever it reads (a StopIteration the listener caught), and of
    whatever text (one a helper coroutine's StopIteration became): only Python's, made of a
    StopIteration that left the listener's coroutine, is renamed for the listener."""
    bus = HookBus()
    bus.on("agent/pre-step", listener)
    with pytest.raises(RuntimeError) as raised:
        await bus.serial("agent/pre-step", "execution")
    assert str(raised.value) == text
    assert raised.value.__traceback__ is not None


def test_emit_raising_keeps_a_stop_iteration_as_the_cause_of_its_failure() -> None:
    """R4.8: a listener's StopIteration is raised as a RuntimeError naming the listener, caused by
    it, so its traceback still shows the listener's line: the error does not come without a cause
    and with nothing of where the listener raised."""
    bus = HookBus()

    def exhausted(*_args: object) -> None:
        next(iter(()))

    bus.on("session/event", exhausted)
    with pytest.raises(
        RuntimeError, match=r"a session/event listener .* raised StopIteration"
    ) as raised:
        bus.emit_raising("session/event", "session", "event")
    cause = raised.value.__cause__
    assert isinstance(cause, StopIteration)
    assert cause.__traceback__ is not None
    assert cause.__traceback__.tb_next is not None
    assert cause.__traceback__.tb_next.tb_frame.f_code.co_name == "exhausted"
