"""The event bus: emit, serial, strict serial, waterfall and parallel dispatch (SPEC 6.1)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar, final

import attrs
import trio

from retinue._callables import check_callable
from retinue._errors import HookError, synchronous_failure, synchronous_failure_of

from ._calls import (
    call,
    listener_label,
    log_unraised,
    note_culprit,
    refuse_coroutine,
    stop_iteration_failure,
)
from ._chain import run_chain
from ._listeners import Entry, Seam, agent_scope
from ._results import RESULTS, Takes, refusal
from ._seams import SEAMS, Listener, SeamName, check_listener, seam_mode

__all__ = ["SEAMS", "HookBus", "Listener", "SeamName", "agent_scope"]

log = logging.getLogger("retinue.hooks")
T = TypeVar("T")


@final
@attrs.define(eq=False)
class HookBus:
    """Listener registry and dispatcher shared by every agent of a runtime.

    A listener registered with ``agent=`` hears only that agent's dispatches
    (R6.5); lists are copied before dispatch so (un)registering during a
    dispatch is safe.

    *bus_of*, given by the runtime that owns the bus, finds the bus an agent
    handle's agent dispatches on (``None`` for an object it does not know as
    a handle): scoping to a handle of an agent that dispatches on another bus
    is refused (:meth:`scope_of`). A bus of no runtime, without it, takes any
    handle by its id. *id_labelled*, given by the same runtime, finds the id of
    a live agent that a string passed as an id labels, if no live agent has
    that id: such a name is refused.
    """

    _listeners: dict[str, Seam] = attrs.field(factory=dict, init=False)
    # The seams each scope has listeners on: an agent's teardown visits only those.
    _scopes: dict[str, set[str]] = attrs.field(factory=dict, init=False)
    # Keyed by a token per watch, so an unwatch finds its own entry at once
    # (every agent watches session/event, and agents are disposed in any order).
    _watchers: dict[str, dict[object, Callable[[], object]]] = attrs.field(factory=dict, init=False)
    # Watches of whether one agent's dispatch of a seam is heard, by seam, then agent id:
    # a listener scoped to one agent wakes only that agent's, not every agent's.
    _scope_watchers: dict[str, dict[str, dict[object, Callable[[], object]]]] = attrs.field(
        factory=dict, init=False
    )
    _orders: itertools.count[int] = attrs.field(factory=itertools.count, init=False)
    # A lookup, not a yes-or-no about ownership: a runtime builds its bus before what
    # tells its agents apart, so the bus compares the answer with itself.
    _bus_of: Callable[[object], HookBus | None] | None = attrs.field(
        default=None, kw_only=True, alias="bus_of"
    )
    _id_labelled: Callable[[str], str | None] | None = attrs.field(
        default=None, kw_only=True, alias="id_labelled"
    )

    def on(self, name: str, fn: Listener, *, agent: object = None) -> Callable[[], None]:
        """Register *fn* for seam *name*; returns an idempotent unregister function.

        *agent* is an agent (or its id) to scope the listener to.

        Raises:
            ValueError: *name* is not a seam (a listener for it would never run);
                or *agent* is a handle of another runtime's agent, or a string
                no agent id can be (:meth:`scope_of`).
            TypeError: *fn* is not callable; or a generator function (sync or
                async, or an object whose ``__call__`` is one), whose body a call
                would never run; or an ``async def`` function (or an object whose
                ``__call__`` is one) and *name* an emit seam, whose listeners are
                called synchronously; or *agent* is not an agent handle, an agent
                id or ``None``.
            AgentDisposedError: *agent* is a disposed handle.
        """
        check_listener(name, fn)
        entry = Entry(fn, self.scope_of(agent), next(self._orders))
        seam = self._listeners.get(name)
        first = seam is None
        if seam is None:
            seam = self._listeners[name] = Seam()
        heard = seam.heard_by(entry.scope)
        seam.add(entry)
        if entry.scope is not None:
            self._scopes.setdefault(entry.scope, set()).add(name)
        if first:
            self._notify(name)
        if not heard:
            self._notify_scopes(name, entry.scope)

        def unregister() -> None:
            current = self._listeners.get(name)
            if current is None or not current.remove(entry):
                return
            if entry.scope is not None and entry.scope not in current.scoped:
                self._forget_scope(entry.scope, name)
            if not current:
                del self._listeners[name]
                self._notify(name)
            if name in self._scope_watchers and not current.heard_by(entry.scope):
                self._notify_scopes(name, entry.scope)

        return unregister

    def scope_of(self, agent: object) -> str | None:
        """The scope an ``agent=`` argument names on this bus: ``None`` or an agent id.

        What scopes a registration to an agent on this bus (a tool of its
        registry too) takes *agent* through here.

        Raises:
            TypeError: *agent* is not an agent handle, an agent id or ``None``.
            ValueError: *agent* is a handle of an agent that dispatches on
                another bus (another runtime's, disposed or not): scoped by its
                id here, what is registered would never hear it, would hear this
                runtime's agent of that id, and would outlive its teardown;
                or *agent* is a string no agent's id can be (empty, or holding a
                control character or a path separator, say: R11.12); or a
                name that labels a live agent's id (``<name>-session-<uuid4>``)
                and is no live agent's id itself, so nothing would hear it.
            AgentDisposedError: *agent* is a disposed handle.
        """
        # The label first: a name no id can be ("..") may still label live agents' ids.
        if isinstance(agent, str) and self._id_labelled is not None:
            labelled = self._id_labelled(agent)
            if labelled is not None:
                raise ValueError(
                    f"agent={agent!r} is the name labelling live agent {labelled!r}, not an "
                    "agent id: pass the agent's handle or its id"
                )
        return agent_scope(agent, None if self._bus_of is None else self._elsewhere)

    def _elsewhere(self, handle: object) -> bool:
        """Whether *handle*'s agent dispatches on another bus (another runtime's)."""
        assert self._bus_of is not None
        bus = self._bus_of(handle)
        return bus is not None and bus is not self

    def _forget_scope(self, scope: str, name: str) -> None:
        names = self._scopes.get(scope)
        if names is not None:
            names.discard(name)
            if not names:
                del self._scopes[scope]

    def watch(self, name: str, fn: Callable[[], object]) -> Callable[[], None]:
        """Call *fn* now and whenever *name* gains its first or loses its last listener.

        *fn* reads :meth:`has_listeners`. This lets a relay that would run on
        every event exist only while someone listens. Returns an idempotent
        unwatch function, which removes this watch only: *fn* may be watched
        more than once.

        Raises:
            ValueError: *name* is not a seam (*fn* would never be called again).
            TypeError: *fn* is not callable, or is a generator or an ``async def``
                function, or returns a coroutine (closed unrun); a later call that returns one
                is logged as a watcher's failure.
        """
        seam_mode(name)
        check_callable(fn, "watchers", synchronous=True)
        watchers = self._watchers.setdefault(name, {})
        return _watching(name, fn, watchers, lambda: self._watchers.pop(name))

    def watch_scope(self, name: str, scope: str, fn: Callable[[], object]) -> Callable[[], None]:
        """Call *fn* now and whenever whether *scope*'s dispatch of *name* is heard may change.

        *fn* reads :meth:`hears` ``(name, scope)``: a listener scoped to another
        agent does not call it. Takes and raises as :meth:`watch`; returns its unwatch.
        """
        seam_mode(name)
        check_callable(fn, "watchers", synchronous=True)
        scopes = self._scope_watchers.setdefault(name, {})

        def forget() -> None:
            del scopes[scope]
            if not scopes:
                del self._scope_watchers[name]

        return _watching(name, fn, scopes.setdefault(scope, {}), forget)

    def _notify_scopes(self, name: str, scope: str | None) -> None:
        """Call the scope watchers of *name* whose answer may have changed: *scope*'s, or
        every agent's when *scope* is None (a listener of every agent came or went)."""
        scopes = self._scope_watchers.get(name)
        if not scopes:
            return
        if scope is None:
            tables = list(scopes.values())
        else:
            own = scopes.get(scope)
            tables = [] if own is None else [own]
        self._call_watchers(name, [fn for table in tables for fn in table.values()])

    def _notify(self, name: str) -> None:
        watchers = self._watchers.get(name)
        self._call_watchers(name, list(watchers.values()) if watchers else [])

    def _call_watchers(self, name: str, watchers: list[Callable[[], object]]) -> None:
        # Contained: a raising watcher must not leave a registration half done
        # or stop a teardown's drop_scope partway.
        for fn in watchers:
            try:
                refuse_coroutine(name, fn, fn(), "watchers")
            except BaseException as exc:
                if not synchronous_failure(exc):
                    raise
                log.exception("watcher of %s failed (contained)", name)

    def drop_scope(self, scope: str) -> None:
        """Unregister every listener scoped to *scope* (an agent id); never blocks.

        Every seam's entries are removed before any watcher hears of it, so even
        an uncontained failure of a watcher (a ``KeyboardInterrupt``) leaves none
        of *scope*'s listeners for a later agent of the same id.
        """
        emptied: list[str] = []
        unheard: list[str] = []
        for name in sorted(self._scopes.pop(scope, ())):
            seam = self._listeners.get(name)
            if seam is None:
                continue
            seam.scoped.pop(scope, None)
            if not seam.shared:
                unheard.append(name)
            if not seam:
                del self._listeners[name]
                emptied.append(name)
        for name in emptied:
            self._notify(name)
        for name in unheard:
            self._notify_scopes(name, scope)

    def has_listeners(self, name: str) -> bool:
        """Whether any listener is registered for *name* (scoped or not).

        Raises:
            ValueError: *name* is not a seam, as :meth:`on` refuses it: a misspelled
                name would read as a seam nobody listens to.
        """
        if name in self._listeners:
            return True
        seam_mode(name)  # checked only when unheard: a heard name is a seam
        return False

    def hears(self, name: str, scope: str | None) -> bool:
        """Whether *scope*'s dispatch of *name* reaches any listener; builds nothing.

        The gate before a dispatch: another agent's scoped listener is no reason
        to dispatch, nor to treat this agent's call as heard.
        """
        # A membership test first: on the hot path most seams have no listener at all.
        return name in self._listeners and self._listeners[name].heard_by(scope)

    def listeners(self, name: str, scope: object = None) -> list[Listener]:
        """The listeners *scope*'s dispatch of *name* reaches, in registration order.

        *scope* is an agent (a handle, disposed or not) or its id, or ``None`` for
        the listeners of every agent alone.

        Raises:
            ValueError: *name* is not a seam, as :meth:`has_listeners` says; or
                *scope* is a handle of another runtime's agent, as :meth:`on` refuses it.
            TypeError: *scope* is not an agent handle, an agent id or ``None``.
        """
        if type(scope) is not str:
            foreign = None if self._bus_of is None else self._elsewhere
            scope = agent_scope(scope, foreign, argument="scope", query=True)
        return self._reached(name, scope)

    def _reached(self, name: str, scope: str | None) -> list[Listener]:
        """:meth:`listeners` of a scope known to be an agent's id or ``None``."""
        seam = self._listeners.get(name)
        if seam is None:
            seam_mode(name)
            return []
        return seam.reached(scope)

    def emit(self, name: str, *args: object, scope: str | None = None) -> None:
        """Call every listener synchronously; each failure is logged and contained (R6.1).

        A ``SystemExit`` too: only Ctrl-C passes on.
        """
        if name not in self._listeners:
            return
        for fn in self._reached(name, scope):
            try:
                refuse_coroutine(name, fn, fn(*args))
            except BaseException as exc:
                # A SystemExit too (R6.1): a notification's listener never ends the runtime.
                if not synchronous_failure(exc):
                    raise
                log.exception("%s failed%s (contained)", listener_label(name, fn), _of_agent(scope))

    def emit_raising(self, name: str, *args: object, scope: str | None = None) -> None:
        """Call every listener synchronously; the first failure propagates after all ran.

        The other listeners' failures are logged: one exception propagates. A
        listener's ``BaseException`` that is no Ctrl-C is its failure, as a
        ``HookError`` (:func:`retinue._errors.synchronous_failure_of`); Ctrl-C propagates at once.
        """
        if name not in self._listeners:
            return
        failures: list[Exception] = []
        for fn in self._reached(name, scope):
            try:
                refuse_coroutine(name, fn, fn(*args))
            except StopIteration as exc:
                # Raised from the append, it would reach the loop's coroutines (PEP 479).
                failures.append(stop_iteration_failure(listener_label(name, fn), exc))
            except Exception as exc:
                note_culprit(exc, f"raised by {listener_label(name, fn)}")
                failures.append(exc)
            except BaseException as exc:
                if not synchronous_failure(exc):
                    # Ctrl-C passes on at once: the failures before it would go unsaid.
                    log_unraised(name, failures, "Ctrl-C passed on")
                    raise
                # A Cancelled or a SystemExit is the listener's own.
                failures.append(synchronous_failure_of(exc, listener_label(name, fn), HookError))
        if failures:
            log_unraised(name, failures[1:], "another listener's failure was")
            raise failures[0]

    async def serial(self, name: str, *args: object, scope: str | None = None) -> None:  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path
        """Await listeners one after another; a failure propagates (R6.2).

        In every awaited mode a listener's ``BaseException`` that passes on
        (Ctrl-C, a real cancel) propagates as it is; any other that is no
        ``Exception`` (a ``SystemExit``, a stray cancel) propagates as a
        ``HookError`` naming the listener, caused by it.

        With no listener for *name* it returns without yielding: seams nobody
        listens to cost no scheduling point on the agent's hot path.
        """
        if name not in self._listeners:
            return  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path
        for fn in self._reached(name, scope):
            await call(name, fn, *args)

    async def strict_serial(self, name: str, *args: object, scope: str | None = None) -> object:
        """Await listeners in order; the first non-``None`` result ends the chain (R6.2).

        Like :meth:`serial`, it does not yield when nobody listens.
        """
        if name not in self._listeners:
            return None  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path
        takes = RESULTS.get(name)
        for fn in self._reached(name, scope):
            result = await call(name, fn, *args)
            if result is None:
                continue
            if takes is not None and not takes.accepts(result):
                raise refusal(name, fn, result, takes)
            return result
        return None  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path

    async def waterfall(
        self,
        name: str,
        default: Callable[[], Awaitable[T]],
        *args: object,
        scope: str | None = None,
        takes: Takes | None = None,
    ) -> T:
        """Run the middleware chain; the first listener is outermost (R6.3).

        Each listener is called as ``fn(*args, next)``; ``await next()`` runs the
        rest of the chain, ending in *default*. Each listener's result is checked
        as it returns against *takes*, else what the seam takes: a layer above
        this one gives what one dispatch takes (a result for its tool call).
        """
        chain = self._reached(name, scope)
        if not chain:
            return await default()
        return await run_chain(name, chain, default, args, takes or RESULTS.get(name))

    async def waterfall_value(
        self, name: str, value: T, *args: object, scope: str | None = None
    ) -> T:
        """:meth:`waterfall` whose innermost step returns *value* (the common case).

        With no listener for *name* it returns *value* without yielding.
        """
        if name not in self._listeners:
            return value  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path

        async def innermost() -> T:
            return value  # noqa: ASYNC910 - a default value; the listeners are the checkpoints

        return await self.waterfall(name, innermost, *args, scope=scope)

    async def parallel(self, name: str, *args: object, scope: str | None = None) -> None:
        """Run every listener concurrently and wait for all; a failure propagates (R6.4):
        of several, the first-registered listener's.

        Does not yield when nobody listens. A cancel or Ctrl-C propagates as
        in :meth:`serial`, bare: not in the group of the nursery the
        listeners run in.
        """
        if name not in self._listeners:
            return  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path
        chain = self._reached(name, scope)
        if not chain:
            return  # noqa: ASYNC910 - no listener, no yield: unheard seams cost nothing on the hot path
        # By the listener's place in the chain: the failure raised is the first-registered
        # failing listener's, not whichever trio happened to run first.
        failed: dict[int, Exception] = {}

        async def run(place: int, fn: Listener) -> None:  # noqa: ASYNC910 - a child task; the nursery exit checkpoints
            try:
                await call(name, fn, *args)
            except Exception as exc:  # noted by call() with the listener that raised it
                failed[place] = exc

        try:
            async with trio.open_nursery() as nursery:
                for place, fn in enumerate(chain):
                    nursery.start_soon(run, place, fn)
        except BaseException as exc:
            # Cancelled (a deadline, say) or Ctrl-C: none of the failures is raised. Bare
            # under trio's loose exception groups, grouped under the strict default.
            log_unraised(
                name, [failed[place] for place in sorted(failed)], "the dispatch was cancelled"
            )
            if not isinstance(exc, BaseExceptionGroup):
                raise
            # run() keeps every failure, so the nursery's group holds only what passes
            # on: one of it passes on as serial dispatch passes it, not in a group.
            raise _passing_on(exc) from None
        if failed:
            first, *others = (failed[place] for place in sorted(failed))
            log_unraised(name, others, "another listener's failure was")
            raise first


def _of_agent(scope: str | None) -> str:
    return "" if scope is None else f" for agent {scope!r}"


def _passing_on(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception of *group* a dispatch raises: its Ctrl-C, else its first cancel."""
    interrupt = group.subgroup(KeyboardInterrupt)
    return _first_leaf(interrupt if interrupt is not None else group)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _watching(
    name: str,
    fn: Callable[[], object],
    watchers: dict[object, Callable[[], object]],
    forget: Callable[[], object],
) -> Callable[[], None]:
    """Add *fn* to *watchers* and call it once; returns its unwatch, which calls *forget*
    as it leaves the table empty."""
    token = object()
    watchers[token] = fn

    def unwatch() -> None:
        # A table is forgotten only once empty, so *watchers* is still the current one.
        if watchers.pop(token, None) is not None and not watchers:
            forget()

    try:
        # A lambda over an async function passes the registration check; what it
        # returns would never run, each call warning only of a coroutine never awaited.
        refuse_coroutine(name, fn, fn(), "watchers")
    except BaseException:
        # The caller gets no unwatch: a registration left behind could never be removed.
        unwatch()
        raise
    return unwatch
