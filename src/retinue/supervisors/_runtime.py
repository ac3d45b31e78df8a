"""The runtime: the root supervisor nursery that owns every agent's driver."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from functools import partial
from typing import final

import attrs
import trio

from retinue._errors import AgentDisposedError, ConfigError, SessionError, StoreError
from retinue._options import AgentOptions
from retinue.actors import Agent
from retinue.config import LoopConfig
from retinue.hooks import HookBus
from retinue.loop import (
    DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    AgentCore,
    LoopServices,
    check_parallel_cap,
)
from retinue.prompt import Section
from retinue.providers import AdmissionController, Model, RetryNotice, RetryPolicy, manage
from retinue.session import Session
from retinue.stores import MemoryStore, SessionStore, check_session_id
from retinue.tools import Tool, ToolRegistry

from ._configured import start_configured_agents
from ._registry import AgentRegistry
from ._supervise import RestartPolicy, supervise

__all__ = ["Runtime", "open_runtime"]

log = logging.getLogger("retinue.supervisors")
Setup = Callable[[Agent], Awaitable[None] | None]


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
    _cleanups: dict[str, list[Callable[[], None]]] = attrs.field(factory=dict, init=False)
    # Ids being created, each with the scope :meth:`aclose` cancels to abort it.
    _creations: dict[str, trio.CancelScope] = attrs.field(factory=dict, init=False)
    _creation_ended: trio.lowlevel.ParkingLot = attrs.field(
        factory=trio.lowlevel.ParkingLot, init=False
    )

    @property
    def hooks(self) -> HookBus:
        """The event bus every agent dispatches through."""
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

        Its id is *session_id*, else ``<name>-session-<uuid4>`` (R13.3). Raises
        ``SessionError(SESSION_ALREADY_EXISTS)`` for a live or stored id.
        Cancellation before publication leaves nothing behind.
        """
        options = options or AgentOptions()
        agent_id = session_id or f"{name}-session-{uuid.uuid4()}"
        with self._creating(agent_id):
            if await self.store.exists(agent_id):
                raise SessionError(
                    f"session {agent_id!r} already exists", code="SESSION_ALREADY_EXISTS"
                )
            session = Session.create(agent_id, cwd=cwd or options.cwd)
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
        (R11.15, R11.16).
        """
        with self._creating(agent_id):
            session = await self.store.load(agent_id)
            try:
                agent = self._make_agent(session, options or AgentOptions())
                await self._setup(agent, setup)
                self._publish(agent, source="resume", new=False)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await self._release_claim(session)
                raise
        return agent

    async def _release_claim(self, session: Session) -> None:
        """Give up the writer claim ``load`` took for a session that was not started."""
        try:
            self.store.attach(session)
            await self.store.detach(session)
        except Exception:
            log.exception("releasing session %s after a failed resume failed", session.id)
            await trio.lowlevel.checkpoint()

    def fork_agent_session(
        self, source_id: str, child_id: str, boundary: int | None = None
    ) -> Session:
        """Fork a live agent's session (R4.25); the child can be started with ``start_forked``."""
        source = self.agents.get(source_id)
        if source is None:
            raise SessionError(f"session {source_id!r} is not live", code="SESSION_NOT_FOUND")
        if child_id in self.agents or child_id in self._creations:
            raise SessionError(
                f"session {child_id!r} already exists", code="SESSION_ALREADY_EXISTS"
            )
        return source.session.fork(child_id, boundary)

    async def start_forked(
        self, session: Session, options: AgentOptions | None = None, *, setup: Setup | None = None
    ) -> Agent:
        """Start an agent on a forked session (a fresh ``startup``, R11.17)."""
        with self._creating(session.id):
            if await self.store.exists(session.id):
                raise SessionError(
                    f"session {session.id!r} already exists", code="SESSION_ALREADY_EXISTS"
                )
            agent = self._make_agent(session, options or AgentOptions())
            await self._setup(agent, setup)
            self._publish(agent, source="startup", new=True)
        return agent

    @contextmanager
    def _creating(self, agent_id: str) -> Iterator[None]:
        """Reserve *agent_id* for one creation in flight, which :meth:`aclose` aborts (R12.10)."""
        self._check_free(agent_id)
        scope = self._creations[agent_id] = trio.CancelScope()
        try:
            with scope:
                yield
        finally:
            del self._creations[agent_id]
            self._creation_ended.unpark_all()
        if scope.cancelled_caught:
            raise RuntimeError(f"agent loop is not active: {agent_id!r} was not started")

    def _check_free(self, agent_id: str) -> None:
        if self._closing:
            raise RuntimeError("the runtime is shutting down")
        try:
            check_session_id(agent_id)
        except StoreError as exc:
            raise SessionError(exc.message, code="INVALID_SESSION_ID") from exc
        if agent_id in self.agents or agent_id in self._creations:
            raise SessionError(
                f"session {agent_id!r} is already live", code="SESSION_ALREADY_EXISTS"
            )

    def _make_agent(self, session: Session, options: AgentOptions) -> Agent:
        core = AgentCore(session.id, options, session, self._services)
        if options.system_prompt:
            core.sections = (Section("persona", options.system_prompt, 0),)
        return Agent(core, self._dispose_agent)

    async def _setup(self, agent: Agent, setup: Setup | None) -> None:
        cleanups: list[Callable[[], None]] = []
        self._cleanups[agent.id] = cleanups
        if setup is None:
            await trio.lowlevel.checkpoint()
            return
        try:
            result = setup(agent)
            if result is not None:
                await result
            else:
                await trio.lowlevel.checkpoint()
        except BaseException:
            self._unwind(agent.id)
            raise

    def scoped(self, agent: Agent, unregister: Callable[[], None]) -> None:
        """Tie *unregister* to *agent*'s lifetime (scoped listeners and tools)."""
        self._cleanups.setdefault(agent.id, []).append(unregister)

    def _unwind(self, agent_id: str) -> None:
        self.hooks.drop_scope(agent_id)
        self._services.tools.drop_scope(agent_id)
        for cleanup in reversed(self._cleanups.pop(agent_id, [])):
            try:
                cleanup()
            except Exception:
                log.exception("cleanup of agent %s failed (contained)", agent_id)

    def _publish(self, agent: Agent, *, source: str, new: bool) -> None:
        """Publication order (R12.5); synchronous. Refused once shutdown has begun (R12.10)."""
        if self._closing:
            self._unwind(agent.id)
            raise RuntimeError(f"agent loop is not active: {agent.id!r} was not started")
        core = _core(agent)
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
        hooks = self.hooks
        relay = _EventRelay(hooks, core.session, agent.id)
        self.scoped(agent, hooks.watch("session/event", relay.toggle))
        self.scoped(agent, relay.detach)
        self.agents.add(agent)
        hooks.emit("session/created", agent.session, scope=agent.id)
        core.emit("agent/created")
        core.published = True
        core.emit("agent/session-start", source)
        self._nursery.start_soon(self._run_agent, agent, name=f"agent {agent.id}")

    async def _run_agent(self, agent: Agent) -> None:
        core = _core(agent)
        core.driver_task = trio.lowlevel.current_task()
        try:
            await supervise(core, self.restart)
        finally:
            if core.disposed:
                await agent.dispose()

    async def _dispose_agent(self, agent: Agent) -> None:
        """Teardown in order (R12.9), memoized (R12.8), shielded; never raises."""
        core = _core(agent)
        if core.in_own_driver():
            # Its tool or listener cannot wait for the driver it runs under: stop
            # the agent; the driver's own task tears it down once it has exited.
            core.mark_disposed()
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if not core.published:
            # Never started (its setup failed, or is still running): nothing to stop
            # or flush, and a creation still in flight refuses to publish it.
            core.mark_disposed()
            agent.end_subscriptions()
            core.torn_down.set()
            await trio.lowlevel.checkpoint()
            return
        # Memoized on the agent's own core: a resumed agent reuses the id.
        if core.disposal_started:
            await core.torn_down.wait()
            return
        core.disposal_started = True
        with trio.CancelScope(shield=True):
            try:
                core.mark_disposed()
                await core.driver_exited.wait()
                self.agents.remove(agent.id)
                core.emit("agent/disposed")
                self._unwind(agent.id)
                agent.end_subscriptions()
                try:
                    await self.store.detach(core.session)
                except Exception as exc:
                    log.warning("final flush of session %s failed: %s", agent.id, exc)
            finally:
                core.torn_down.set()

    async def aclose(self) -> None:
        """Stop accepting agents, abort creations in flight, dispose every live agent (R12.10).

        Waits until every aborted creation has unwound and every agent is disposed.
        """
        self._closing = True
        for scope in self._creations.values():
            scope.cancel()
        while self._creations:
            await self._creation_ended.park()
        async with trio.open_nursery() as nursery:
            for agent in self.agents.list():
                nursery.start_soon(agent.dispose)


@final
class _EventRelay:
    """Relays a session's appends to ``session/event``, observing only while someone listens.

    The relay would otherwise cost a call on every append of every agent.
    """

    __slots__ = ("_detach", "_hooks", "_relay", "_session")

    def __init__(self, hooks: HookBus, session: Session, agent_id: str) -> None:
        self._hooks = hooks
        self._session = session
        # A partial, not a lambda: it runs on every append while attached.
        self._relay = partial(hooks.emit_raising, "session/event", session, scope=agent_id)
        self._detach: Callable[[], None] | None = None

    def toggle(self) -> None:
        """Observe the session while ``session/event`` has listeners, else stop."""
        if not self._hooks.has_listeners("session/event"):
            self.detach()
        elif self._detach is None:
            self._detach = self._session.observe(self._relay)

    def detach(self) -> None:
        """Stop observing; idempotent."""
        detach, self._detach = self._detach, None
        if detach is not None:
            detach()


def _core(agent: Agent) -> AgentCore:
    return agent._core


def _managed(
    model: Model,
    retry: RetryPolicy | None,
    admission: AdmissionController | None,
    hooks: HookBus,
    registry_of: dict[str, Runtime],
) -> Model:
    """Wrap *model* with the runtime's one retry policy and admission control."""
    if retry is None and admission is None:
        return model

    def on_retry(notice: RetryNotice) -> None:
        runtime = registry_of.get("runtime")
        agent = runtime.agents.get(notice.session_id) if runtime and notice.session_id else None
        hooks.emit("agent/retry", agent, notice, scope=notice.session_id)

    return manage(model, retry=retry, admission=admission, on_retry=on_retry)


def _as_models(models: Model | Mapping[str, Model]) -> Model:
    if isinstance(models, Mapping):
        from retinue.providers import ModelRouter

        return ModelRouter.of(models)
    return models


@asynccontextmanager
async def open_runtime(
    *,
    models: Model | Mapping[str, Model],
    tools: Iterable[Tool] = (),
    store: SessionStore | None = None,
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    system_prompt: str | None = None,
    variables: Mapping[str, str | None] | None = None,
    tool_order: Iterable[str] | None = None,
    restart: RestartPolicy | None = None,
    flush_timeout: float = 30.0,
    retry: RetryPolicy | None = None,
    admission: AdmissionController | None = None,
    config: LoopConfig | None = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime: a nursery that owns every agent's driver.

    *retry* and *admission* wrap the models once for every agent: retries
    before a step's first chunk (each one reported as ``agent/retry``), and
    limits shared by all agents per (provider, model). On exit every live
    agent is disposed (its turn closed and flushed), then the store is
    closed. Raises :class:`ConfigError` for an invalid configuration.

    *config* (a :class:`~retinue.config.LoopConfig`) replaces
    *max_parallel_tool_calls* with its own cap, and its agents are started
    before the runtime is yielded (R13.3; failures are contained, R13.4).
    """
    if config is not None:
        max_parallel_tool_calls = config.max_parallel_tool_calls
    check_parallel_cap(max_parallel_tool_calls)
    if flush_timeout <= 0:
        raise ConfigError(f"flush_timeout must be positive, got {flush_timeout!r}")
    hooks = HookBus()
    registry = ToolRegistry(hooks, tools)
    sections = (Section("system", system_prompt, 0),) if system_prompt else ()
    async with AsyncExitStack() as stack:
        the_store: SessionStore = store if store is not None else MemoryStore()
        if hasattr(type(the_store), "__aenter__"):  # where `async with` looks it up
            await stack.enter_async_context(the_store)  # type: ignore[arg-type]
        else:
            stack.push_async_callback(the_store.aclose)
        registry_of: dict[str, Runtime] = {}
        services = LoopServices(
            hooks=hooks,
            tools=registry,
            models=_managed(_as_models(models), retry, admission, hooks, registry_of),
            store=the_store,
            sections=sections,
            variables=dict(variables or {}),
            tool_order=None if tool_order is None else tuple(tool_order),
            max_parallel_tool_calls=max_parallel_tool_calls,
            flush_timeout=flush_timeout,
        )
        async with trio.open_nursery() as nursery:
            runtime = Runtime(services, nursery, restart or RestartPolicy(), admission=admission)
            registry_of["runtime"] = runtime
            try:
                if config is not None:
                    await start_configured_agents(runtime, config)
                yield runtime
            finally:
                with trio.CancelScope(shield=True):
                    await runtime.aclose()
