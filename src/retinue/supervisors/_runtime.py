"""The runtime: the root supervisor nursery that owns every agent's driver."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from functools import partial
from typing import final

import attrs
import trio

from retinue._errors import AgentDisposedError, SessionError
from retinue._lossless import shown
from retinue._options import AgentOptions, persona_sections
from retinue.actors import Agent
from retinue.loop import (
    AgentCore,
    LoopServices,
    check_parallel_cap,
)
from retinue.loop._core import in_run_of, waiting_agent
from retinue.loop._marks import SETTING_UP, TEARING_DOWN, enter_setup
from retinue.providers import AdmissionController, Model
from retinue.session import Session
from retinue.stores import SessionStore
from retinue.tools import Tool, ToolRegistry

from ._agent_arguments import (
    check_kept_cwd,
    check_loaded,
    check_setup,
    checked_id,
    loaded_session,
    new_agent_id,
    options_of,
    with_cwd,
    with_tools,
)
from ._cleanups import Cleanups, scoped_cleanup, unwind
from ._creation import Creation, Setup, core_of, reserved, run_setup, wait_for_creations
from ._driven import mark_driven, refuse_driven
from ._hooks import RuntimeHooks
from ._newclaims import claimed_new
from ._registry import AgentRegistry
from ._relay import EventRelay
from ._stranded import StrandedSessions
from ._supervise import RestartPolicy, supervise
from ._teardown import Teardowns

__all__ = ["Runtime"]


@final
@attrs.define(eq=False, repr=False)
class Runtime:
    """Owns agents, the shared services and the nursery every driver runs in.

    Made by :func:`open_runtime`; not constructed by users. Its methods that start
    or close agents raise ``RuntimeError`` when called off its trio run (from another
    ``trio.run``, one a sync tool body started in its thread, say), as its agents' verbs do.
    """

    _services: LoopServices
    _nursery: trio.Nursery
    # Read-only, as the services are: the teardowns hold this registry, the running
    # agents this policy, and the models this controller.
    restart: RestartPolicy = attrs.field(on_setattr=attrs.setters.frozen)
    """How a crashed driver is restarted."""
    agents: AgentRegistry = attrs.field(factory=AgentRegistry, on_setattr=attrs.setters.frozen)
    """The live agents."""
    admission: AdmissionController | None = attrs.field(
        default=None, on_setattr=attrs.setters.frozen
    )
    """The admission controller shared by every agent, if configured."""
    _closing: bool = attrs.field(default=False, init=False)
    # The run the runtime's nursery belongs to: only its tasks may start agents there.
    _trio_token: trio.lowlevel.TrioToken = attrs.field(
        factory=trio.lowlevel.current_trio_token, init=False
    )
    _cleanups: Cleanups = attrs.field(factory=dict, init=False)
    # Ids being created, each with the scope :meth:`aclose` or a dispose cancels to abort it.
    _creations: dict[str, Creation] = attrs.field(factory=dict, init=False)
    _stranded: StrandedSessions = attrs.field(
        default=attrs.Factory(lambda self: StrandedSessions(self._services), takes_self=True),
        init=False,
    )
    _teardowns: Teardowns = attrs.field(
        default=attrs.Factory(
            lambda self: Teardowns(
                self._nursery,
                self._services,
                self.agents,
                self._cleanups,
                self._creations,
                self._stranded,
            ),
            takes_self=True,
        ),
        init=False,
    )

    def __repr__(self) -> str:
        # Counts, not contents: a runtime holds thousands of agents, each with its
        # listeners and cleanups, which a log line or a traceback would print whole.
        state = " closing" if self._closing else ""
        return (
            f"<Runtime{state} agents={len(self.agents)} creating={len(self._creations)} "
            f"tearing_down={len(self._teardowns)} store={self.store!r}>"
        )

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
        tools: Iterable[Tool] | None = None,
        setup: Setup | None = None,
    ) -> Agent:
        """Create, publish and start an agent; returns its handle.

        Its id is *session_id*, else ``<name>-session-<uuid4>`` (R13.3). *name* is a non-empty
        label, as a configured agent's is. *cwd* (an absolute path) is the session's working
        directory, recorded in its header: a shorthand for ``options.cwd``, which the agent's
        ``options`` then report. *tools* are the agent's own, beside the runtime's: registered
        for it (as ``rt.tools.add(tool, agent=...)``) before *setup* runs, they go with its
        teardown. Raises ``TypeError`` for *options* that are no :class:`AgentOptions` or a
        *setup* that is not callable, :class:`ConfigError` for *tools* that are no
        collection of :class:`~retinue.tools.Tool` or hold two of one name, an
        invalid *cwd* or one that differs from ``options.cwd``,
        ``SessionError(INVALID_SESSION_ID)`` for an empty name or an id no store can hold, and
        ``SessionError(SESSION_ALREADY_EXISTS)`` for an id live here, stored, or claimed by
        another store of the same storage (one SQLite file, another process), stored yet or
        not (``StoreError(SESSION_TRACKED)`` for one live in another runtime sharing the store).
        An agent of that id being torn down (its dispose begun, by any task) is waited for
        first, as by a resume; ``AgentError(WAITS_FOR_ITSELF)`` from its own tool, listener or
        teardown (``WAIT_CYCLE`` from an agent that teardown waits for through others). The
        store claims the id from here on (one open file on the JSONL and SQLite stores), until
        the agent's teardown lets the session go (one whose last flush failed keeps it, for a
        load to take over) or its creation fails; a custom store without
        ``claim_new`` (see :class:`~retinue.stores.SessionStore`) only says whether it is stored.
        Cancellation before publication leaves nothing behind; ``RuntimeError`` once the
        runtime is shutting down (its close aborts a creation in flight).
        """
        self._check_run()
        options = with_cwd(options_of(options), cwd)
        check_setup(setup)
        setup = with_tools(self.tools, tools, setup)
        agent_id = checked_id(new_agent_id(name, session_id))
        new = partial(Session.create, agent_id, cwd=options.cwd)
        return await self._start_new(agent_id, new, options, setup)

    async def resume_agent(
        self,
        agent_id: str,
        options: AgentOptions | None = None,
        *,
        tools: Iterable[Tool] | None = None,
        setup: Setup | None = None,
    ) -> Agent:
        """Load *agent_id*'s session from the store (repairing a crashed tail) and start it.

        Seqs and turn numbers continue; the first request logs a ``resume`` header
        (R11.15, R11.16). An agent with this id being torn down (its dispose begun, by any
        task) is waited for: its session is free once detached (R12.9). If that agent's
        final flush failed, its buffered events are committed first, so the loaded log
        lacks none of them; while the store still fails, this raises its ``StoreError``
        and a later call tries again. A deadline ending the wait leaves nothing done.
        Called from that agent's own tool, listener or teardown, which its teardown
        waits for, it raises ``AgentError(WAITS_FOR_ITSELF)`` (``WAIT_CYCLE`` from an
        agent that teardown waits for through others).

        *tools* are the agent's own, as for :meth:`create_agent`: a session stores none, nor
        ``max_steps``, so give them again. *options* without a ``model`` keep the stored
        model and settings; each
        setting they give (provider, temperature, max_tokens, stop) replaces
        the stored one. The session keeps the cwd of its stored header (R11.15): *options*
        whose ``cwd`` is another raise ``SessionError(CWD_MISMATCH)``, the session let go.
        *options* that are no :class:`AgentOptions`, or a *setup* that is not callable,
        raise ``TypeError``; an id no store can hold ``SessionError(INVALID_SESSION_ID)``,
        one not stored ``StoreError(SESSION_NOT_FOUND)``, one live here
        ``SessionError(SESSION_ALREADY_EXISTS)``, one another runtime writes
        ``StoreError(SESSION_TRACKED)`` (``SESSION_LOCKED`` from a store of its own). A
        ``load`` returning no :class:`~retinue.session.Session`, or another id's, raises
        ``StoreError(CORRUPT_SESSION)``, one leaving a crashed turn open (R11.9)
        ``StoreError(OPEN_TURN)``; a resume as the runtime shuts down ``RuntimeError``.
        """
        self._check_run()
        options = options_of(options)
        check_setup(setup)
        setup = with_tools(self.tools, tools, setup)
        agent_id = checked_id(agent_id)
        await self._teardowns.released(agent_id)
        with self._creating(agent_id):
            await self._stranded.settle(agent_id)
            session = loaded_session(await self.store.load(agent_id), agent_id)
            try:
                check_loaded(session, agent_id)
                check_kept_cwd(session, options, how="resumed")
                agent = self._make_agent(session, options)
                await self._setup(agent, setup)
                self._publish(agent, source="resume", new=False)
            except BaseException:
                # Retired before the claim's release waits: a task its setup started
                # must find it disposed, not scope to it what a later agent would get.
                self._creations[agent_id].end_unpublished()
                with trio.CancelScope(shield=True):
                    await self._stranded.release(session)
                raise
        return agent

    def fork_agent_session(
        self, source_id: str, child_id: str, boundary: int | None = None
    ) -> Session:
        """Fork a live agent's session (R4.25); the child can be started with ``start_forked``.

        Raises ``SessionError``: ``INVALID_SESSION_ID`` for a *source_id* or
        *child_id* no store can hold, ``SESSION_NOT_FOUND`` for a *source_id* no
        agent is live under, ``SESSION_ALREADY_EXISTS`` for a *child_id* in use,
        ``INVALID_BOUNDARY`` for a *boundary* no seq of the log, and ``OPEN_TURN``
        for one inside a turn, the default (the last event) too while the source's
        turn runs (forked from its own tool, say): pass its last ``turn/end``'s seq.
        """
        child_id = checked_id(child_id)
        source = self.agents.get(checked_id(source_id))
        if source is None:
            raise SessionError(f"session {source_id!r} is not live", code="SESSION_NOT_FOUND")
        if self._in_use(child_id):
            raise SessionError(
                f"session {child_id!r} already exists", code="SESSION_ALREADY_EXISTS"
            )
        return source.session.fork(child_id, boundary)

    async def start_forked(
        self,
        session: Session,
        options: AgentOptions | None = None,
        *,
        tools: Iterable[Tool] | None = None,
        setup: Setup | None = None,
    ) -> Agent:
        """Start an agent on a forked session (a fresh ``startup``, R11.17), with *tools* of its
        own as :meth:`create_agent` gives them.

        The fork keeps its source's cwd: *options* whose ``cwd`` is set to
        another raise ``SessionError(CWD_MISMATCH)``, and a *session* that is no
        :class:`Session` or a *setup* that is not callable ``TypeError``. A session an
        agent drives, in this runtime or another, raises
        ``SessionError(SESSION_ALREADY_EXISTS)`` until that agent's teardown has
        detached it from its store: a session has one driver (R12.7). Then it is the
        store's to take, as any session is: one that holds it refuses it
        ``SESSION_ALREADY_EXISTS``. Called from the own tool,
        listener or teardown of an agent of the fork's id being torn down, which
        its teardown waits for, it raises ``AgentError(WAITS_FOR_ITSELF)``
        (``WAIT_CYCLE`` from an agent that teardown waits for through others).
        """
        self._check_run()
        options = options_of(options)
        check_setup(setup)
        setup = with_tools(self.tools, tools, setup)
        if not isinstance(session, Session):
            raise TypeError(
                f"session must be a Session (from fork_agent_session), got {shown(session)}"
            )
        refuse_driven(session)
        check_kept_cwd(session, options, how="forked")
        return await self._start_new(checked_id(session.id), lambda: session, options, setup)

    async def _start_new(
        self,
        agent_id: str,
        new: Callable[[], Session],
        options: AgentOptions,
        setup: Setup | None,
    ) -> Agent:
        """Once *agent_id* is free, reserve it, claimed in the store, and start an agent on the
        session *new* gives, refused if the store holds the id: what starts a new agent or a fork."""
        await self._teardowns.released(agent_id)
        with self._creating(agent_id):
            await self._stranded.settle(agent_id)
            async with claimed_new(self.store, agent_id, self._services.flush_timeout):
                agent = self._make_agent(new(), options)
                await self._setup(agent, setup)
                self._publish(agent, source="startup", new=True)
        return agent

    def _check_run(self) -> None:
        """Refuse a call made off the runtime's trio run: its agents' tasks would be
        started, and its waits woken, from a run they are not part of, which fails inside trio."""
        if not in_run_of(self._trio_token):
            raise RuntimeError(
                "the runtime's methods must be called from its own trio run, not from a "
                "worker thread or another trio.run (one a tool body started in its thread, "
                "say): call them outside that run, or through trio.from_thread.run"
            )

    def _creating(self, agent_id: str) -> AbstractContextManager[None]:
        """Reserve *agent_id* for one creation in flight, aborted by :meth:`aclose` (R12.10)
        or by disposing its agent during the setup (R12.4)."""
        self._check_free(agent_id)
        return reserved(self._creations, agent_id)

    def _check_free(self, agent_id: str) -> None:
        if self._closing:
            raise RuntimeError("the runtime is closing or closed: it starts no more agents")
        if self._in_use(agent_id):
            raise SessionError(
                f"session {agent_id!r} is already live", code="SESSION_ALREADY_EXISTS"
            )

    def _in_use(self, agent_id: str) -> bool:
        """Whether an agent of *agent_id* is live, being created or being torn down."""
        return agent_id in self.agents or agent_id in self._creations or agent_id in self._teardowns

    def _make_agent(self, session: Session, options: AgentOptions) -> Agent:
        core = AgentCore(session.id, options, session, self._services)
        core.sections = persona_sections(options.system_prompt)
        agent = self._creations[session.id].agent = Agent(core, self._teardowns.dispose)
        return agent

    async def _setup(self, agent: Agent, setup: Setup | None) -> None:
        """Run *setup*, or just its checkpoint; failed or cancelled, it leaves nothing behind."""
        self._cleanups[agent.id] = {}
        token = enter_setup(core_of(agent))
        try:
            await run_setup(agent, setup)
        except BaseException:
            unwind(self._services, self._cleanups, agent.id)
            raise
        finally:
            SETTING_UP.reset(token)

    def scoped(self, agent: Agent, unregister: Callable[[], None]) -> Callable[[], None]:
        """Tie *unregister* to *agent*'s lifetime (scoped listeners and tools); never blocks.

        *unregister* runs once, when the agent is torn down or its creation fails.
        Returns a function that runs it now instead (idempotent): the runtime then
        forgets it, where a caller's own call would leave it held until teardown.

        Raises:
            TypeError: *agent* is no agent handle (an id, say): nothing would
                tie *unregister* to a teardown.
            AgentDisposedError: *agent* is disposed, as for a listener or tool
                scoped to it; *unregister* is not called, and what it would
                unregister stays the caller's to remove.
            TypeError: *unregister* is not callable: the teardown could only
                log its call's failure.
            ValueError: *agent* is another runtime's: its teardown would never
                run *unregister*.
        """
        return scoped_cleanup(self._services, self._cleanups, agent, unregister)

    def _publish(self, agent: Agent, *, source: str, new: bool) -> None:
        """Publication order (R12.5); synchronous. Refused once shutdown has begun (R12.10)."""
        if self._closing:
            unwind(self._services, self._cleanups, agent.id)
            raise RuntimeError(f"agent loop is not active: {agent.id!r} was not started")
        core = core_of(agent)
        try:
            if core.disposed:
                raise AgentDisposedError(f"agent {agent.id!r} was disposed during its setup")
            if new:
                # A fork another start_forked started meanwhile (a resume loads a fresh one).
                refuse_driven(core.session)
                self.store.attach_new(core.session)
            else:
                self.store.attach(core.session)
        except BaseException:
            unwind(self._services, self._cleanups, agent.id)
            raise
        mark_driven(core.session)
        hooks = self._services.hooks
        relay = EventRelay(hooks, core.session, agent.id)
        self.scoped(agent, hooks.watch_scope("session/event", agent.id, relay.toggle))
        self.scoped(agent, relay.detach)
        self.agents._add(agent)
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
            self._teardowns.start(agent)
            raise
        self._nursery.start_soon(self._run_agent, agent, name=f"agent {agent.id}")

    @trio.lowlevel.enable_ki_protection  # Ctrl-C goes to the main task: supervise always runs
    async def _run_agent(self, agent: Agent) -> None:
        SETTING_UP.set(())  # started from a setup, perhaps, but no part of it
        TEARING_DOWN.set(None)  # nor of a teardown it was started from
        core = core_of(agent)
        core.driver_task = trio.lowlevel.current_task()
        try:
            await supervise(core, self.restart)
        finally:
            # This task's context keeps the core (the driving mark), so the core lets go of
            # the task, driven for the last time, rather than leave both to the cyclic collector.
            core.driver_task = None
            # However the driver ended (disposed, given up after crashes, or cancelled
            # with the runtime), nothing will run the agent again: tear it down.
            self._teardowns.start(agent)

    async def aclose(self) -> None:
        """Stop accepting agents, abort creations in flight, dispose every live agent (R12.10).

        Waits until every aborted creation has unwound and every teardown (those
        begun before too) has finished, then tries once more each final flush that
        failed, unless it hung. Always a checkpoint. Cancelled, even at once, it
        has begun every teardown all the same, which the runtime's exit waits for
        (as from an agent's setup, which the close aborts). Called from an
        agent's own tool, listener or teardown, it returns once the teardowns
        have begun: its agent's cannot end before the call does, and the
        runtime's exit waits for them all. Called from an agent of another
        runtime, its wait for the teardowns is recorded like a ``wait_idle``:
        if one of them already waits on that agent, directly or through others,
        it raises ``AgentError(WAIT_CYCLE)`` once the teardowns have begun,
        rather than waiting in a circle.
        """
        self._check_run()
        self._closing = True
        for creation in self._creations.values():
            creation.scope.cancel()
        # Begun before the first checkpoint, as no agent is published once closing: a
        # caller cancelled there (by a deadline, or as the setup the loop above aborts)
        # still leaves every agent on its way out, as a cancelled aclose in trio closes.
        for agent in self.agents.list():
            self._teardowns.start(agent)
        caller = waiting_agent()
        # Only this runtime's agent is let off: one of another runtime (which opened
        # this one in its tool, say) does not wait for itself here. Its own teardown
        # cancels it at its next checkpoint, so it returns past one that does not.
        if caller is not None and self._teardowns.of(caller.id) is caller:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        await trio.lowlevel.checkpoint()
        await wait_for_creations(self._creations)
        if caller is None:
            await self._teardowns.wait_all()
            await self._stranded.settle_all()
            return
        await self._teardowns.wait_all_as(caller)
        # As from no agent: a runtime opened in another's tool closes here on its exit.
        await self._stranded.settle_all()
