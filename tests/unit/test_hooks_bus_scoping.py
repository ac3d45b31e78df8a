"""The event bus's scoped listeners, (un)registration and watchers (SPEC 6.1, R6.5)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

import retinue.hooks
from retinue._errors import HookError
from retinue.hooks import HookBus
from tests.helpers import DEADLINE, Next

if TYPE_CHECKING:
    from _typeshed import TraceFunction


class Handle:
    """Something with an ``id``, like an agent."""

    def __init__(self, agent_id: str) -> None:
        self.id = agent_id


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

    bus.on("tools/execute", tag, agent="a")
    assert await bus.waterfall("tools/execute", default, "execution", scope="a") == ["a-only"]
    assert await bus.waterfall("tools/execute", default, "execution", scope="b") == []
    assert bus.listeners("agent/status", "a") != bus.listeners("agent/status", "b")


def test_listeners_takes_an_agent_as_on_takes_it() -> None:
    """R6.5: asked for a handle's listeners (a disposed one's too: a query scopes nothing), the
    bus answers for its agent, as ``on`` scoped them: the shared listeners alone would be a
    wrong answer, given without a word."""
    bus = HookBus()

    def shared(*_args: object) -> None:
        pass

    def own(*_args: object) -> None:
        pass

    bus.on("agent/status", shared)
    bus.on("agent/status", own, agent=Handle("a"))
    assert bus.listeners("agent/status", Handle("a")) == [shared, own]
    assert bus.listeners("agent/status", "a") == [shared, own]
    assert bus.listeners("agent/status") == [shared]
    gone = Handle("a")
    gone.status = "disposed"  # type: ignore[attr-defined]
    assert bus.listeners("agent/status", gone) == [shared, own]
    with pytest.raises(TypeError, match=r"^scope takes an agent handle"):
        bus.listeners("agent/status", 7)


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
    # Asked of the listeners, the bus refuses it as on() does: its answer would be another's.
    with pytest.raises(ValueError, match=r"^agent 'theirs' belongs to another runtime$"):
        bus.listeners("agent/status", Handle("theirs"))
    assert len(bus.listeners("agent/status", Handle("ours"))) == 1


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
    assert await bus.waterfall("tools/execute", default, "execution") == "default"
    assert trace == ["later"]
    trace.clear()
    assert await bus.waterfall("tools/execute", default, "execution") == "default"
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


def _hook_lines_run_by(call: Callable[[], object]) -> int:
    """How many lines of the hooks package *call* runs: a cost no machine's load changes."""
    package = str(Path(retinue.hooks.__file__).parent)
    count = 0

    def trace(frame: FrameType, event: str, _arg: object) -> TraceFunction | None:
        nonlocal count
        if not frame.f_code.co_filename.startswith(package):
            return None
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


def _unregister_costs(count: int) -> list[int]:
    """The lines run to unregister, newest first, the two oldest and two newest listeners of a
    seam of *count* shared and *count* scoped ones, down to one left."""
    bus = HookBus()
    shared = [bus.on("agent/status", lambda *_: None) for _ in range(count)]
    scoped = [bus.on("agent/status", lambda *_: None, agent="a") for _ in range(count)]
    chosen = [shared[1], shared[0], scoped[-1], scoped[-2], shared[-1]]
    return [_hook_lines_run_by(unregister) for unregister in chosen]


def test_unregistering_costs_the_same_however_many_listeners_the_seam_has() -> None:
    """R6.5: an unregister finds its own listener at once: it runs as many lines of the bus
    in a seam of thousands of listeners as in a seam of three, wherever the listener is."""
    assert _unregister_costs(10_000) == _unregister_costs(3)


def test_the_listener_queries_refuse_a_name_that_is_no_seam() -> None:
    """R6.5: asking about a misspelled seam raises ValueError naming the closest one, as registering
    for it does, rather than answering it as a seam nobody hears."""
    bus = HookBus()
    bus.on("agent/status", lambda *_: None)
    with pytest.raises(ValueError, match="did you mean 'agent/status'"):
        bus.has_listeners("agent/stauts")
    with pytest.raises(ValueError, match="did you mean 'agent/status'"):
        bus.listeners("agent/stauts")
    assert bus.has_listeners("agent/status")
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


def test_an_empty_agent_id_is_refused_as_a_scope() -> None:
    """R6.5, R11.12: no agent's id is empty, so a listener scoped to ``agent=""`` would
    never be heard; refused when registered, and nothing is left registered."""
    bus = HookBus()
    with pytest.raises(ValueError, match="names no agent"):
        bus.on("agent/status", lambda *_: None, agent="")
    with pytest.raises(ValueError, match="names no agent"):
        bus.scope_of("")
    assert not bus.has_listeners("agent/status")


@pytest.mark.parametrize("agent_id", ["a\x00b", "a/b", "..", "x" * 513, "a\ud800"])
def test_an_agent_id_no_session_id_can_be_is_refused_as_a_scope(agent_id: str) -> None:
    """R6.5, R11.12: an id the stores refuse is no agent's (a control character, a path
    separator, a relative path, too long, a lone surrogate): refused when registered, naming
    what is wrong, and nothing is left registered; a query of its listeners finds none."""
    bus = HookBus()
    with pytest.raises(ValueError, match=r"names no agent: it (contains|is)"):
        bus.on("agent/status", lambda *_: None, agent=agent_id)
    assert not bus.has_listeners("agent/status")
    assert bus.listeners("agent/status", agent_id) == []


@pytest.mark.parametrize("name", [7, ["agent/status"], None, b"agent/status"])
def test_a_seam_name_that_is_no_str_is_refused_naming_it(name: object) -> None:
    """R6.1: a name of another type is a TypeError that says a seam's name is a str,
    where difflib, looking for a close seam, raised one about iteration or hashing."""
    bus = HookBus()
    with pytest.raises(TypeError, match=r"a seam's name is a str .*, got "):
        bus.on(name, lambda *_: None)  # type: ignore[arg-type]
    if not isinstance(name, list):  # unhashable: the lookup's own TypeError comes first
        with pytest.raises(TypeError, match=r"a seam's name is a str"):
            bus.has_listeners(name)  # type: ignore[arg-type]


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
