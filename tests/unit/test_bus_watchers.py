"""The hook bus's watchers and the checks of its arguments (SPEC 6.1, R6.5; docs/hooks.md)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine

import pytest
import trio

from retinue.hooks import HookBus

SEAM = "session/event"


def _toggle(bus: HookBus) -> None:
    """Give *SEAM* its first listener, then take it away: two changes every watcher hears."""
    bus.on(SEAM, lambda *_: None)()


def _counter(calls: list[str], label: str) -> Callable[[], None]:
    return lambda: calls.append(label)


def test_each_watch_of_one_function_is_its_own() -> None:
    """A function watched twice is called twice per change; each unwatch removes one watch,
    and calling it again does not remove the other."""
    bus = HookBus()
    calls: list[str] = []
    fn = _counter(calls, "fn")
    first = bus.watch(SEAM, fn)
    bus.watch(SEAM, fn)
    assert calls == ["fn", "fn"]
    first()
    first()
    calls.clear()
    _toggle(bus)
    assert calls == ["fn", "fn"], "the second watch hears both changes"


def test_an_old_unwatch_leaves_a_later_watch_of_the_seam_alone() -> None:
    """An unwatch is idempotent: called again after its seam's last watch ended and a new
    watch began, it removes nothing of the new one."""
    bus = HookBus()
    calls: list[str] = []
    unwatch = bus.watch(SEAM, _counter(calls, "old"))
    unwatch()
    unwatch()
    bus.watch(SEAM, _counter(calls, "new"))
    unwatch()
    calls.clear()
    _toggle(bus)
    assert calls == ["new", "new"]


def test_unwatching_in_any_order_keeps_the_others_in_watch_order() -> None:
    """Watchers are called in the order they started watching, whichever stopped meanwhile."""
    bus = HookBus()
    calls: list[str] = []
    unwatches = [bus.watch(SEAM, _counter(calls, label)) for label in "abcd"]
    unwatches[3]()
    unwatches[1]()
    calls.clear()
    _toggle(bus)
    assert calls == ["a", "c", "a", "c"]
    for unwatch in unwatches:
        unwatch()
    calls.clear()
    _toggle(bus)
    assert calls == []


def test_an_unwatch_during_a_change_takes_effect_at_the_next() -> None:
    """docs/hooks.md: (un)registering while the bus calls out is safe and counts from the next call."""
    bus = HookBus()
    calls: list[str] = []
    later: list[Callable[[], None]] = []

    def first() -> None:
        calls.append("first")
        for unwatch in later:
            unwatch()

    bus.watch(SEAM, first)
    later.append(bus.watch(SEAM, _counter(calls, "second")))
    calls.clear()
    unregister = bus.on(SEAM, lambda *_: None)
    assert calls == ["first", "second"]
    unregister()
    assert calls == ["first", "second", "first"]


def test_a_watcher_that_fails_at_once_is_not_kept() -> None:
    """``watch`` calls *fn* at once; if that raises, the caller gets no unwatch, so the
    watch is not kept either."""
    bus = HookBus()
    calls: list[str] = []

    def broken() -> None:
        calls.append("broken")
        raise RuntimeError("watcher bug")

    with pytest.raises(RuntimeError, match="watcher bug"):
        bus.watch(SEAM, broken)
    _toggle(bus)
    assert calls == ["broken"]


def test_watch_refuses_a_misspelled_seam_naming_the_closest() -> None:
    """R6.1: as for ``on``, a name that is not a seam is refused: *fn* would never be called."""
    calls: list[str] = []
    with pytest.raises(ValueError, match="did you mean 'session/event'"):
        HookBus().watch("sesion/event", _counter(calls, "fn"))
    assert calls == []


def test_watch_refuses_what_it_cannot_call(caplog: pytest.LogCaptureFixture) -> None:
    """A watcher is called with no arguments: what is not callable is refused at ``watch``,
    naming the mistake, and is not kept to fail at every later change."""
    bus = HookBus()
    with pytest.raises(TypeError, match="watchers must be callable"):
        bus.watch(SEAM, "not callable")  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        _toggle(bus)
    assert caplog.records == []


def test_watch_refuses_an_async_watcher() -> None:
    """Watchers are called synchronously: a coroutine function's body would never run."""

    async def watcher() -> None:
        """Never awaited."""

    with pytest.raises(TypeError, match="called synchronously"):
        HookBus().watch(SEAM, watcher)  # type: ignore[arg-type]


def test_a_watcher_returning_a_coroutine_is_refused_then_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R6.1: as for an emit listener, a coroutine a watcher returns is closed and reported: a
    watcher written as ``lambda: relay()`` over an async ``relay`` is not kept to never run, each
    change warning only that a coroutine was never awaited.
    """
    ran: list[str] = []

    async def relay() -> None:
        ran.append("relay")

    def starts_relay() -> Coroutine[object, object, None]:
        return relay()

    bus = HookBus()
    with pytest.raises(TypeError, match=r"session/event watchers must be synchronous"):
        bus.watch(SEAM, starts_relay)
    _toggle(bus)  # refused at once: not kept
    calls: list[None] = []

    def relays_after_its_first_call() -> Coroutine[object, object, None] | None:
        calls.append(None)
        return None if len(calls) == 1 else relay()

    bus.watch(SEAM, relays_after_its_first_call)
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        _toggle(bus)
    assert ran == []
    failures = [record.exc_info[1] for record in caplog.records if record.exc_info]
    test = test_a_watcher_returning_a_coroutine_is_refused_then_logged.__name__
    watcher = f"{__name__}.{test}.<locals>.relays_after_its_first_call"
    refusal = f"session/event watchers must be synchronous: {watcher} returned a coroutine"
    assert [str(failure) for failure in failures] == [refusal] * 2


class _Handle:
    def __init__(self, agent_id: object) -> None:
        self.id = agent_id


@pytest.mark.parametrize("agent", [42, uuid.uuid4(), _Handle(7), object()])
def test_on_refuses_an_agent_argument_that_names_no_agent(agent: object) -> None:
    """R6.5: ``agent=`` takes a handle, an agent id or ``None``; anything else is a
    ``TypeError`` saying so, and registers nothing."""
    bus = HookBus()
    with pytest.raises(TypeError, match=r"agent= takes an agent handle, an agent id \(a str\)"):
        bus.on("agent/status", lambda *_: None, agent=agent)
    assert not bus.has_listeners("agent/status")


def test_on_scopes_to_a_handle_or_an_id() -> None:
    """R6.5: a handle and its id name the same scope."""
    bus = HookBus()
    bus.on("agent/status", lambda *_: None, agent=_Handle("a"))
    bus.on("agent/status", lambda *_: None, agent="a")
    assert len(bus.listeners("agent/status", "a")) == 2
    assert bus.listeners("agent/status", "b") == []


def _stray_cancelled() -> trio.Cancelled:
    """A ``trio.Cancelled`` caught outside its scope: what a misbehaving watcher might raise."""

    async def catch() -> trio.Cancelled:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                return exc
        raise AssertionError("the cancel was not delivered")

    return trio.run(catch)


def test_a_watcher_raising_a_stray_cancelled_is_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SPEC 6.1, R6.5: a watcher's stray ``trio.Cancelled`` is contained and logged, as a
    listener's is in ``emit``: ``on`` returns its unregister and ``drop_scope`` removes
    every seam's scoped listeners, so a re-created agent of the id hears none of them.
    """
    stray = _stray_cancelled()
    armed = [False]

    def watcher() -> None:
        if armed[0]:
            raise stray

    bus = HookBus()
    bus.watch("agent/pre-step", watcher)
    armed[0] = True
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        unregister = bus.on("agent/pre-step", lambda *_: None)
        bus.on("agent/pre-step", lambda *_: None, agent="A")
        bus.on("session/event", lambda *_: None, agent="A")
        bus.on("tools/result", lambda *_: None, agent="A")
        unregister()
        bus.drop_scope("A")
    assert "watcher of agent/pre-step failed" in caplog.text
    for seam in ("agent/pre-step", "session/event", "tools/result"):
        assert not bus.has_listeners(seam), seam
        assert not bus.hears(seam, "A"), seam


def test_drop_scope_leaves_nothing_behind_when_a_watcher_raises_keyboard_interrupt() -> None:
    """SPEC 6.1: drop_scope removes every seam's entries before telling watchers, so even
    an uncontained ``KeyboardInterrupt`` from a watcher leaves no listener of the scope.
    """
    armed = [False]

    def watcher() -> None:
        if armed[0]:
            raise KeyboardInterrupt

    bus = HookBus()
    bus.watch("agent/pre-step", watcher)
    bus.on("agent/pre-step", lambda *_: None, agent="A")
    bus.on("session/event", lambda *_: None, agent="A")
    bus.on("tools/result", lambda *_: None, agent="A")
    armed[0] = True
    with pytest.raises(KeyboardInterrupt):
        bus.drop_scope("A")
    for seam in ("agent/pre-step", "session/event", "tools/result"):
        assert not bus.has_listeners(seam), seam


def test_a_scope_watcher_hears_only_what_changes_whether_its_agent_is_heard() -> None:
    """R6.5: a listener scoped to another agent calls no scope watcher of this one; this
    agent's own scoped listener, a listener of every agent, and the drop of this agent's
    scope each call it, once per change of whether its dispatch is heard."""
    bus = HookBus()
    heard: list[bool] = []
    bus.watch_scope(SEAM, "a", lambda: heard.append(bus.hears(SEAM, "a")))
    assert heard == [False]
    bus.on(SEAM, lambda *_: None, agent="b")()
    assert heard == [False], "another agent's listener changes nothing here"
    own = bus.on(SEAM, lambda *_: None, agent="a")
    second = bus.on(SEAM, lambda *_: None, agent="a")
    assert heard == [False, True]
    own()
    assert heard == [False, True], "one of its listeners is left"
    second()
    assert heard == [False, True, False]
    shared = bus.on(SEAM, lambda *_: None)
    bus.on(SEAM, lambda *_: None, agent="a")
    assert heard == [False, True, False, True], "already heard through the shared listener"
    shared()
    assert heard[-1] is True, "still heard through its own listener"
    bus.drop_scope("a")
    assert heard[-1] is False


def test_a_scope_unwatch_stops_its_calls() -> None:
    """An unwatch of a scope watch is idempotent and ends its calls."""
    bus = HookBus()
    calls: list[str] = []
    unwatch = bus.watch_scope(SEAM, "a", _counter(calls, "a"))
    unwatch()
    unwatch()
    bus.on(SEAM, lambda *_: None, agent="a")
    assert calls == ["a"]
