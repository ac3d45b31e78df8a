"""The runtime: the root supervisor nursery that owns every agent's driver."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import final

import attrs
import trio

from retinue._errors import (
    AgentDisposedError,
    AgentError,
    SessionError,
    StoreError,
    synchronous_failure,
)
from retinue._lossless import shown
from retinue._options import AgentOptions, persona_sections
from retinue.actors import Agent
from retinue.hooks import agent_scope
from retinue.loop import (
    AgentCore,
    LoopServices,
    check_parallel_cap,
)
from retinue.loop._core import SETTING_UP, TEARING_DOWN, circle_error, waiting_agent
from retinue.providers import AdmissionController, Model
from retinue.session import Session, TurnEndReason
from retinue.stores import SessionStore, check_session_id
from retinue.tools import ToolRegistry

from ._agent_arguments import check_kept_cwd, check_setup, new_agent_id, options_of, with_cwd
from ._creation import Creation, Setup, core_of, end_unpublished, run_setup
from ._detach import detach_within, release_claim
from ._hooks import RuntimeHooks
from ._registry import AgentRegistry
from ._relay import EventRelay
from ._supervise import RestartPolicy, supervise

__all__ = ["Runtime"]

log = logging.getLogger("retinue.supervisors")


@final
@attrs.define(eq=False)
class Runtime:
    """Owns agents, the shared services and the nursery every driver runs in.

    Made by :func:`open_runtime`; not constructed by users.
    """

    _services: LoopServices
    _nursery: trio.Nursery
    restart: RestartPolicy
    agents: AgentRegistry = attrs.field(factory=AgentRegistry)
    admission: AdmissionController | None = None
    """The admission controller shared by every agent, if configured."""
    _closing: bool = attrs.field(default=False, init=False)
    # Per agent, in registration order; keyed so one run early leaves at once.
    _cleanups: dict[str, dict[object, Callable[[], None]]] = attrs.field(factory=dict, init=False)
    # Ids being created, each with the scope :meth:`aclose` or a dispose cancels to abort it.
    _creations: dict[str, Creation] = attrs.field(factory=dict, init=False)
    # Ids whose teardown is under way: reserved until their final flush has ended (R12.9).
    _teardowns: dict[str, AgentCore] = attrs.field(factory=dict, init=False)
    # Sessions whose final flush failed or timed out: released by the store with their
    # unflushed events buffered, committed before their id is taken again here.
    # Kept here rather than asked of the store: a store may be shared (with another
    # runtime, or its owner) and knows what is attached, not what this runtime left.
    _stranded: dict[str, Session] = attrs.field(factory=dict, init=False)
    # Of those, the ids whose store did not answer within flush_timeout: the runtime's
    # close does not wait for it once more, so that a hanging store cannot hold it open.
    _hung: set[str] = attrs.field(factory=set, init=False)

    @property
    def hooks(self) -> RuntimeHooks:
        """The event bus every agent dispatches through, each seam's listener typed."""
        return self._services.hooks

    @property
    def tools(self) -> ToolRegistry:
        """The shared tool registry."""
        return self._services.tools

    @property
    def models(self) -> Model:
        """The model (or router) every agent calls."""
        return self._services.models

    @property
    def store(self) -> SessionStore:
        """The session store."""
        return self._services.store

    @property
    def max_parallel_tool_calls(self) -> int:
        """How many parallel-safe tool calls of one step may run at once (R9.11, R13.1).

        Assigning a new value applies from the next batch of tool calls of every
        agent; a value that is not a positive integer raises
        :class:`~retinue.ConfigError` and leaves the last good value (R13.6).
        Neither reading nor assigning blocks.
        """
        return self._services.max_parallel_tool_calls

    @max_parallel_tool_calls.setter
    def max_parallel_tool_calls(self, value: int) -> None:
        self._services.max_parallel_tool_calls = check_parallel_cap(value)

    @property
    def closing(self) -> bool:
        """Whether shutdown has begun (:meth:`aclose` was called); no new agents start."""
        return self._closing

    @property
    def supervisor(self) -> Runtime:
        """The root supervisor (the runtime itself)."""
        return self

    async def create_agent(
        self,
        name: str,
        options: AgentOptions | None = None,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        setup: Setup | None = None,
    ) -> Agent:
        """Create, publish and start an agent; returns its handle.

        Its id is *session_id*, else ``<name>-session-<uuid4>`` (R13.3). *name*
        is a non-empty label, as a configured agent's is. *cwd* (an absolute
        path) is the session's working directory, recorded in its header: a
        shorthand for ``options.cwd``, which the agent's ``options`` then
        report. Raises ``TypeError`` for *options* that are no
        :class:`AgentOptions` or a *setup* that is not callable, :class:`ConfigError` for an invalid *cwd* or one
        that differs from ``options.cwd``, ``SessionError(INVALID_SESSION_ID)``
        for an empty name or an id no store can hold, and
        ``SessionError(SESSION_ALREADY_EXISTS)`` for a live or stored id, and
        ``AgentError(WAITS_FOR_ITSELF)`` from the own tool, listener or teardown
        of an agent of that id being torn down, which its teardown waits for
        (``WAIT_CYCLE`` from an agent that teardown waits for through others).
        Cancellation before publication leaves nothing behind.
        """
        options = with_cwd(options_of(options), cwd)
        check_setup(setup)
        agent_id = _checked_id(new_agent_id(name, session_id))
        await self._released(agent_id)
        with self._creating(agent_id):
            await self._settle_stranded(agent_id)
            if await self.store.exists(agent_id):
                raise SessionError(
                    f"session {agent_id!r} already exists", code="SESSION_ALREADY_EXISTS"
                )
            session = Session.create(agent_id, cwd=options.cwd)
            agent = self._make_agent(session, options)
            await self._setup(agent, setup)
            self._publish(agent, source="startup", new=True)
        return agent

    async def resume_agent(
        self,
        agent_id: str,
        options: AgentOptions | None = None,
        *,
        setup: Setup | None = None,
    ) -> Agent:
        """Load *agent_id*'s session from the store (repairing a crashed tail) and start it.

        Seqs and turn numbers continue; the first request logs a ``resume`` header
        (R11.15, R11.16). An agent with this id still being torn down is waited
        for: its session is free once detached (R12.9). If that agent's final
        flush failed, its buffered events are committed first, so the loaded
        log lacks none of them; while the store still fails, this raises its
        ``StoreError`` and a later call tries again. Called from that agent's own
        tool, listener or teardown, which its teardown waits for, it raises
        ``AgentError(WAITS_FOR_ITSELF)`` (``WAIT_CYCLE`` from an agent that
        teardown waits for through others).

        *options* without a ``model`` keep the stored model and settings; each
        setting they give (provider, temperature, max_tokens, stop) replaces
        the stored one. The session keeps the cwd of its stored header (R11.15): *options*
        whose ``cwd`` is set to another raise ``SessionError(CWD_MISMATCH)``,
        and the session is let go as loaded. *options* that are no
        :class:`AgentOptions`, or a *setup* that is not callable, raise ``TypeError``, and an id no store can hold
        ``SessionError(INVALID_SESSION_ID)``.
        """
        options = options_of(options)
        check_setup(setup)
        agent_id = _checked_id(agent_id)
        await self._released(agent_id)
        with self._creating(agent_id):
            await self._settle_stranded(agent_id)
            session = await self.store.load(agent_id)
            try:
                check_kept_cwd(session, options, how="resumed")
                agent = self._make_agent(session, options)
                await self._setup(agent, setup)
                self._publish(agent, source="resume", new=False)
            except BaseException:
                # Retired before the claim's release waits: a task its setup started
                # must find it disposed, not scope to it what a later agent would get.
                self._creations[agent_id].end_unpublished()
                with trio.CancelScope(shield=True):
                    await release_claim(self.store, session)
                raise
        return agent

    def fork_agent_session(
        self, source_id: str, child_id: str, boundary: int | None = None
    ) -> Session:
        """Fork a live agent's session (R4.25); the child can be started with ``start_forked``.

        Raises ``SessionError``: ``INVALID_SESSION_ID`` for a *child_id* no store
        can hold, ``SESSION_NOT_FOUND`` for a *source_id* no agent is live under,
        ``SESSION_ALREADY_EXISTS`` for a *child_id* in use.
        """
        child_id = _checked_id(child_id)
        source = self.agents.get(source_id)
        if source is None:
            raise SessionError(f"session {source_id!r} is not live", code="SESSION_NOT_FOUND")
        if child_id in self.agents or child_id in self._creations or child_id in self._teardowns:
            raise SessionError(
                f"session {child_id!r} already exists", code="SESSION_ALREADY_EXISTS"
            )
        return source.session.fork(child_id, boundary)

    async def start_forked(
        self, session: Session, options: AgentOptions | None = None, *, setup: Setup | None = None
    ) -> Agent:
        """Start an agent on a forked session (a fresh ``startup``, R11.17).

        The fork keeps its source's cwd: *options* whose ``cwd`` is set to
        another raise ``SessionError(CWD_MISMATCH)``, and a *session* that is no
        :class:`Session` or a *setup* that is not callable ``TypeError``. Called from the own tool,
        listener or teardown of an agent of the fork's id being torn down, which
        its teardown waits for, it raises ``AgentError(WAITS_FOR_ITSELF)``
        (``WAIT_CYCLE`` from an agent that teardown waits for through others).
        """
        options = options_of(options)
        check_setup(setup)
        if not isinstance(session, Session):
            raise TypeError(
                f"session must be a Session (from fork_agent_session), got {shown(session)}"
            )
        await self._released(_checked_id(session.id))
        with self._creating(session.id):
            await self._settle_stranded(session.id)
            if await self.store.exists(session.id):
                raise SessionError(
                    f"session {session.id!r} already exists", code="SESSION_ALREADY_EXISTS"
                )
            check_kept_cwd(session, options, how="forked")
            agent = self._make_agent(session, options)
            await self._setup(agent, setup)
            self._publish(agent, source="startup", new=True)
        return agent

    async def _released(self, agent_id: str) -> None:
        """Wait until no teardown of *agent_id* is under way or due; always a checkpoint.

        One is due for an agent its supervisor gave up: disposed, it is torn
        down once its driver has exited.
        """
        tearing_down = self._teardowns.get(agent_id)
        live = self.agents.get(agent_id)
        if tearing_down is None and live is not None and core_of(live).disposed:
            tearing_down = core_of(live)
        if tearing_down is None:
            await trio.lowlevel.checkpoint()
            return
        if tearing_down.in_own_driver() or TEARING_DOWN.get() is tearing_down:
            # From that agent's own tool, listener or teardown: the teardown waits for it.
            raise AgentError(
                f"agent {agent_id!r} is being torn down, which waits for this call from its "
                "own turn or teardown: its id would never be free",
                code="WAITS_FOR_ITSELF",
            )
        # Its teardown frees the id as it ends; a creation racing for it then
        # finds the id taken again, which is what it would have found anyway.
        await _wait_for_teardown(tearing_down, agent_id)

    async def _settle_stranded(self, agent_id: str) -> None:
        """Commit and detach what a failed final flush left of *agent_id*'s session (R12.9).

        Called with the id reserved for a creation; a checkpoint only when there is
        something to settle. Bounded by ``flush_timeout`` like the teardown's own
        try. While the store still fails (or hangs), raises a ``StoreError`` and
        leaves the session for a later try.
        """
        session = self._stranded.get(agent_id)
        if session is None:
            return  # noqa: ASYNC910 - nothing stranded: the caller awaits the store next
        failure = await detach_within(self.store, session, self._services.flush_timeout)
        if failure is not None:
            message = f"the final flush of a disposed agent is still pending: {failure}"
            code = failure.code if isinstance(failure, StoreError) else "STORAGE_ERROR"
            raise StoreError(message, code=code) from failure
        del self._stranded[agent_id]
        self._hung.discard(agent_id)

    async def _settle_all_stranded(self) -> None:
        """Try every failed final flush once more, together, as the runtime closes (R12.9).

        No creation or resume of their ids comes in this runtime any more: in a store
        that outlives the runtime their events would stay buffered until a load takes
        them over. One that fails again, or whose store hung, stays released in the
        store, for the next load of its id or the store's close.
        """
        async with trio.open_nursery() as nursery:
            for agent_id in self._stranded.keys() - self._hung:
                nursery.start_soon(self._settle_at_close, agent_id)

    async def _settle_at_close(self, agent_id: str) -> None:  # noqa: ASYNC910 - called for a stranded id, whose detach is awaited
        try:
            await self._settle_stranded(agent_id)
        except StoreError as exc:
            log.warning(
                "final flush of session %s failed again as the runtime closed: %s; the session "
                "stays released with its unflushed events buffered in the store, for the next "
                "load of the id to take over or the store's close",
                agent_id,
                exc.__cause__ or exc,
            )

    @contextmanager
    def _creating(self, agent_id: str) -> Iterator[None]:
        """Reserve *agent_id* for one creation in flight, aborted by :meth:`aclose` (R12.10)
        or by disposing its agent during the setup (R12.4)."""
        self._check_free(agent_id)
        creation = self._creations[agent_id] = Creation()
        try:
            with creation.scope:
                yield
        finally:
            del self._creations[agent_id]
            creation.end_unpublished()
            disposed = creation.disposed
            creation.ended.set()
        if not creation.scope.cancelled_caught:
            return
        if disposed:
            raise AgentDisposedError(f"agent {agent_id!r} was disposed during its setup")
        raise RuntimeError(f"agent loop is not active: {agent_id!r} was not started")

    def _check_free(self, agent_id: str) -> None:
        if self._closing:
            raise RuntimeError("the runtime is shutting down")
        if agent_id in self.agents or agent_id in self._creations or agent_id in self._teardowns:
            raise SessionError(
                f"session {agent_id!r} is already live", code="SESSION_ALREADY_EXISTS"
            )

    def _make_agent(self, session: Session, options: AgentOptions) -> Agent:
        core = AgentCore(session.id, options, session, self._services)
        core.sections = persona_sections(options.system_prompt)
        agent = self._creations[session.id].agent = Agent(core, self._dispose_agent)
        return agent

    async def _setup(self, agent: Agent, setup: Setup | None) -> None:
        """Run *setup*, or just its checkpoint; failed or cancelled, it leaves nothing behind."""
        self._cleanups[agent.id] = {}
        token = SETTING_UP.set((*SETTING_UP.get(), core_of(agent)))
        try:
            await run_setup(agent, setup)
        except BaseException:
            self._unwind(agent.id)
            raise
        finally:
            SETTING_UP.reset(token)

    def scoped(self, agent: Agent, unregister: Callable[[], None]) -> Callable[[], None]:
        """Tie *unregister* to *agent*'s lifetime (scoped listeners and tools); never blocks.

        *unregister* runs once, when the agent is torn down or its creation fails.
        Returns a function that runs it now instead (idempotent): the runtime then
        forgets it, where a caller's own call would leave it held until teardown.

        Raises:
            AgentDisposedError: *agent* is disposed, as for a listener or tool
                scoped to it; *unregister* is not called, and what it would
                unregister stays the caller's to remove.
            TypeError: *unregister* is not callable: the teardown could only
                log its call's failure.
        """
        if not callable(unregister):
            raise TypeError(f"unregister must be a callable, got {shown(unregister)}")
        agent_scope(agent)
        cleanups = self._cleanups.setdefault(agent.id, {})
        key = object()
        cleanups[key] = unregister

        def now() -> None:
            if cleanups.pop(key, None) is not None:
                unregister()

        return now

    def _unwind(self, agent_id: str) -> None:
        self._services.hooks.drop_scope(agent_id)
        self._services.tools.drop_scope(agent_id)
        cleanups = self._cleanups.pop(agent_id, {})
        # Emptied as it runs, newest first: a cleanup may run another's early (which then
        # finds it gone), and one run early later finds itself gone too.
        while cleanups:
            _, cleanup = cleanups.popitem()
            try:
                cleanup()
            except BaseException as exc:
                # A SystemExit too: the rest of the teardown must still run. Ctrl-C goes on.
                if not synchronous_failure(exc):
                    raise
                log.exception("cleanup of agent %s failed (contained)", agent_id)

    def _publish(self, agent: Agent, *, source: str, new: bool) -> None:
        """Publication order (R12.5); synchronous. Refused once shutdown has begun (R12.10)."""
        if self._closing:
            self._unwind(agent.id)
            raise RuntimeError(f"agent loop is not active: {agent.id!r} was not started")
        core = core_of(agent)
        try:
            if core.disposed:
                raise AgentDisposedError(f"agent {agent.id!r} was disposed during its setup")
            if new:
                self.store.attach_new(core.session)
            else:
                self.store.attach(core.session)
        except BaseException:
            self._unwind(agent.id)
            raise
        hooks = self._services.hooks
        relay = EventRelay(hooks, core.session, agent.id)
        self.scoped(agent, hooks.watch("session/event", relay.toggle))
        self.scoped(agent, relay.detach)
        self.agents.add(agent)
        try:
            hooks.emit("session/created", agent.session, scope=agent.id)
            core.emit("agent/created")
            core.published = True
            core.emit("agent/session-start", source)
        except BaseException:
            # Emitting contains a listener's failures, not Ctrl-C. No driver
            # will run: the agent is torn down as a published one, whose
            # teardown takes it out of the registry and the store again.
            core.published = True
            core.driver_exited.set()
            self._start_teardown(agent)
            raise
        self._nursery.start_soon(self._run_agent, agent, name=f"agent {agent.id}")

    async def _run_agent(self, agent: Agent) -> None:
        SETTING_UP.set(())  # started from a setup, perhaps, but no part of it
        TEARING_DOWN.set(None)  # nor of a teardown it was started from
        core = core_of(agent)
        core.driver_task = trio.lowlevel.current_task()
        try:
            await supervise(core, self.restart)
        finally:
            # However the driver ended (disposed, given up after crashes, or cancelled
            # with the runtime), nothing will run the agent again: tear it down.
            self._start_teardown(agent)

    async def _dispose_agent(self, agent: Agent) -> None:
        """Start the agent's teardown (R12.9) and wait for it; memoized (R12.8).

        The teardown runs in the runtime's nursery, shielded: a cancelled caller
        stops waiting, the teardown still completes, and :meth:`aclose` waits for it.
        """
        core = core_of(agent)
        creation = self._creation_of(core)
        # Its own tool, listener, setup or teardown cannot wait for the driver, creation
        # or teardown it runs under: the agent stops, and its teardown ends once that has unwound.
        waits_for_itself = (
            core.in_own_driver()
            or (creation is not None and core in SETTING_UP.get())
            or TEARING_DOWN.get() is core  # its store's detach, say
        )
        self._start_teardown(agent)
        if waits_for_itself:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if creation is not None:
            creation.scope.cancel()  # its setup is aborted and rolled back (R12.4)
        caller = waiting_agent()
        if caller is None:
            await core.torn_down.wait()
            return
        if caller.wait_cycle(core) is not None:  # marked disposed above: firm waits only
            # The agent being disposed waits for the caller, directly or through
            # others, in a wait its disposal does not cancel (its final flush's
            # listener disposing the caller, say): its teardown needs the caller to
            # finish first, so this one stops it and returns, as from its own turn.
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        # Recorded like a wait_idle, so a wait that would close a circle through
        # this one (the teardown's own listeners waiting on the caller) is refused.
        firm = caller.start_waiting_on(core)
        try:
            await core.torn_down.wait()
        finally:
            caller.stop_waiting_on(core, firm=firm)

    def _creation_of(self, core: AgentCore) -> Creation | None:
        """The creation in flight that made *core*, if it has not ended yet."""
        creation = self._creations.get(core.id)
        return creation if creation is not None and creation.core is core else None

    def _start_teardown(self, agent: Agent) -> None:
        """Stop *agent* and start its teardown once; never blocks."""
        core = core_of(agent)
        if core.disposal_started:
            return
        if not core.published:
            if self._creation_of(core) is None:
                end_unpublished(agent)  # its creation is over: nothing to stop or flush
            else:
                # Aborts its setup; the creation refuses to publish it, unwinds the
                # setup and then ends it, unannounced like every unpublished agent.
                core.disposal_started = True
                core.mark_disposed(announce=False)
            return
        core.disposal_started = True
        # Started before the agent is marked: a listener of its status raising a
        # BaseException (Ctrl-C) must not leave it disposed with no teardown to come.
        self._teardowns[agent.id] = core
        self._nursery.start_soon(self._teardown, agent, name=f"teardown {agent.id}")
        core.mark_disposed()

    async def _teardown(self, agent: Agent) -> None:
        """Wait for the published agent to stop, then unwind it (R12.9); shielded, never raises."""
        SETTING_UP.set(())
        core = core_of(agent)
        TEARING_DOWN.set(core)
        with trio.CancelScope(shield=True):
            try:
                await self._retire(agent)
            finally:
                core.torn_down.set()
                if self._teardowns.get(agent.id) is core:
                    del self._teardowns[agent.id]

    async def _retire(self, agent: Agent) -> None:
        """Teardown order of a published agent once stopped (R12.9)."""
        core = core_of(agent)
        await core.driver_exited.wait()
        # A driver cancelled with the runtime never reached its own discard.
        core.discard_pending(TurnEndReason.disposed())
        self.agents.remove(agent.id)
        try:
            core.emit("agent/disposed")
        finally:
            # Even past a listener's BaseException (Ctrl-C), nothing of the agent stays behind.
            self._unwind(agent.id)
            agent.end_subscriptions()
            await self._detach(agent)

    async def _detach(self, agent: Agent) -> None:
        """Let the store go of a retired agent's session; one it fails to is kept stranded."""
        core = core_of(agent)
        failure = await detach_within(self.store, core.session, self._services.flush_timeout)
        if failure is None:
            return
        # The store released the session, its unflushed events still buffered: the
        # next creation or resume of the id here commits them first, the next load
        # of it elsewhere takes them over, and closing the store drains them.
        self._stranded[agent.id] = core.session
        if isinstance(failure, TimeoutError):
            self._hung.add(agent.id)
        log.warning(
            "final flush of session %s failed: %s; the session was released with its "
            "unflushed events buffered in the store, and the next load of the id takes it "
            "over with them",
            agent.id,
            failure,
        )

    async def aclose(self) -> None:
        """Stop accepting agents, abort creations in flight, dispose every live agent (R12.10).

        Waits until every aborted creation has unwound and every teardown (those
        begun before too) has finished, then tries once more each final flush that
        failed, unless it hung. Always a checkpoint. Called from an
        agent's own tool, listener or teardown, it returns once the teardowns
        have begun: its agent's cannot end before the call does, and the
        runtime's exit waits for them all. Called from an agent of another
        runtime, its wait for the teardowns is recorded like a ``wait_idle``:
        if one of them already waits on that agent, directly or through others,
        it raises ``AgentError(WAIT_CYCLE)`` once the teardowns have begun,
        rather than waiting in a circle.
        """
        self._closing = True
        for creation in self._creations.values():
            creation.scope.cancel()
        await trio.lowlevel.checkpoint()
        while self._creations:
            await next(iter(self._creations.values())).ended.wait()
        for agent in self.agents.list():
            self._start_teardown(agent)
        caller = waiting_agent()
        if caller is None:
            while self._teardowns:
                await next(iter(self._teardowns.values())).torn_down.wait()
            await self._settle_all_stranded()
            return
        # Only this runtime's agent is let off: one of another runtime (which opened
        # this one in its tool, say) does not wait for itself here.
        if self._teardowns.get(caller.id) is caller:
            return
        while self._teardowns:
            await _wait_for_teardowns(caller, tuple(self._teardowns.values()))


def _checked_id(agent_id: object) -> str:
    """*agent_id* if a store can hold it, else ``SessionError(INVALID_SESSION_ID)``.

    Checked before the id is looked up anywhere: an unhashable one would raise
    a bare ``TypeError`` there.
    """
    try:
        return check_session_id(agent_id)
    except StoreError as exc:
        raise SessionError(exc.message, code="INVALID_SESSION_ID") from exc


async def _wait_for_teardown(tearing_down: AgentCore, agent_id: str) -> None:
    """Wait for *tearing_down*'s teardown to end, recorded as the calling agent's wait like
    a ``wait_idle``: that teardown may wait on the caller (its store's detach disposing
    the caller, say), and a flush listener of the caller waiting here would then wait in
    a circle, which raises ``AgentError(WAIT_CYCLE)`` instead."""
    caller = waiting_agent()
    if caller is None:
        await tearing_down.torn_down.wait()
        return
    cycle = caller.wait_cycle(tearing_down)
    if cycle is not None:
        raise circle_error(caller, cycle, f"waiting for the teardown of {agent_id!r}")
    firm = caller.start_waiting_on(tearing_down)
    try:
        await tearing_down.torn_down.wait()
    finally:
        caller.stop_waiting_on(tearing_down, firm=firm)


async def _wait_for_teardowns(caller: AgentCore, teardowns: tuple[AgentCore, ...]) -> None:  # noqa: ASYNC910 - called with at least one teardown, each awaited
    """Wait for all of *teardowns* to end, recorded as the *caller* agent's waits on each.

    Recorded all at once, as the wait is for all of them: a teardown that comes to wait
    on the caller (its store's detach asking it, say) then finds the circle, whichever
    teardown the caller is waiting for at that moment. One that already waits on the
    caller raises ``AgentError(WAIT_CYCLE)`` before anything is recorded.
    """
    for tearing_down in teardowns:
        cycle = caller.wait_cycle(tearing_down)
        if cycle is not None:
            waiting = f"closing the runtime (which waits for the teardown of {tearing_down.id!r})"
            raise circle_error(caller, cycle, waiting)
    firm = [caller.start_waiting_on(tearing_down) for tearing_down in teardowns]
    try:
        for tearing_down in teardowns:
            await tearing_down.torn_down.wait()
    finally:
        for tearing_down, was_firm in zip(teardowns, firm, strict=True):
            caller.stop_waiting_on(tearing_down, firm=was_firm)
