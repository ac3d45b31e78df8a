"""``open_runtime``: the runtime's services, its nursery, and its orderly exit."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncContextDecorator, asynccontextmanager
from types import TracebackType
from typing import ParamSpec, TypeVar, final

import trio

from retinue._endings import lone_ending, reraise
from retinue._errors import only_cancels
from retinue._options import PERSONA, check_prompt_option, persona_sections
from retinue.config import LoopConfig
from retinue.hooks import HookBus
from retinue.loop import LoopServices
from retinue.providers import AdmissionController, Model, RetryNotice, RetryPolicy, manage
from retinue.stores import MemoryStore, SessionStore
from retinue.tools import Tool, ToolRegistry

from ._arguments import (
    check_kinds,
    check_store,
    flush_timeout_of,
    models_of,
    parallel_cap_of,
    tool_order_of,
    tools_of,
    variables_of,
)
from ._cleanups import bus_of
from ._configured import start_configured_agents
from ._registry import AgentRegistry
from ._runtime import Runtime
from ._supervise import RestartPolicy

__all__ = ["open_runtime"]

log = logging.getLogger("retinue.supervisors")


def _managed(
    model: Model,
    retry: RetryPolicy | None,
    admission: AdmissionController | None,
    hooks: HookBus,
    runtime_slot: dict[str, Runtime],
) -> Model:
    """Wrap *model* with the runtime's one retry policy and admission control."""
    if retry is None and admission is None:
        return model

    def on_retry(notice: RetryNotice) -> None:
        runtime = runtime_slot.get("runtime")
        agent = runtime.agents.get(notice.session_id) if runtime and notice.session_id else None
        hooks.emit("agent/retry", agent, notice, scope=notice.session_id)

    return manage(model, retry=retry, admission=admission, on_retry=on_retry)


_T = TypeVar("_T")
_P = ParamSpec("_P")


@final
class _EnteredOnce(AbstractAsyncContextManager[_T], AsyncContextDecorator):
    """A context manager of one runtime, which refuses to be entered twice.

    Entered again (nested, or once more after its exit), a generator-made one
    fails as ``'_AsyncGeneratorContextManager' object has no attribute 'args'``.
    Used as a decorator, as that one may be, each call opens a runtime of its own.
    """

    def __init__(self, open_again: Callable[[], AbstractAsyncContextManager[_T]]) -> None:
        self._open = open_again
        self._opened = open_again()
        self._entered = False

    def _recreate_cm(self) -> _EnteredOnce[_T]:
        return _EnteredOnce(self._open)

    async def __aenter__(self) -> _T:
        if self._entered:
            raise RuntimeError(
                "this open_runtime(...) was entered already: each call opens one runtime, "
                "once; call open_runtime again for another"
            )
        self._entered = True
        return await self._opened.__aenter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._opened.__aexit__(kind, error, traceback)


def _entered_once(
    opens: Callable[_P, AbstractAsyncContextManager[_T]],
) -> Callable[_P, AbstractAsyncContextManager[_T]]:
    @functools.wraps(opens)
    def open_once(*args: _P.args, **kwargs: _P.kwargs) -> AbstractAsyncContextManager[_T]:
        return _EnteredOnce(functools.partial(opens, *args, **kwargs))

    return open_once


@_entered_once
@asynccontextmanager
async def open_runtime(
    *,
    models: Model | Mapping[str, Model],
    tools: Iterable[Tool] = (),
    store: SessionStore | None = None,
    max_parallel_tool_calls: int | None = None,
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
    agent is disposed (its turn closed ``disposed`` and flushed; prompts still
    queued are dropped, never logged: ``wait_idle`` each agent first to let
    them run), then the store is closed. Raises :class:`ConfigError` for an invalid configuration, naming
    the argument, before anything is opened.

    *system_prompt* is the persona every agent gets unless its own
    ``AgentOptions.system_prompt`` replaces it (R2.7); more sections come from
    a ``system-prompt/assemble`` listener.

    *max_parallel_tool_calls* is the tool-call cap; None (the default) takes
    *config*'s cap, else 10. *config* (a :class:`~retinue.config.LoopConfig`)
    sets the cap in its own place, so giving another cap beside it is refused (a
    config whose file set none holds the default, 10); its
    agents are started before the runtime is yielded (R13.3; failures are
    contained, R13.4).

    Args:
        models: The model every agent calls (a :class:`~retinue.ModelRouter` to
            route by provider and model), or a mapping of model names to models,
            routed by name whatever the provider.
        tools: The tools every agent may call (``rt.tools.add`` adds more).
        store: Where sessions are kept; a fresh :class:`~retinue.MemoryStore`
            when ``None``. It is opened here and closed on exit.
        max_parallel_tool_calls: See above.
        system_prompt: See above; a template, checked here.
        variables: Values of the prompt templates' ``{{variables}}``, beside
            ``model``, ``provider`` and ``cwd``; ``None`` as a value means unset.
        tool_order: Tool names in the order requests list them, with at most one
            ``"*"`` standing for the rest, sorted by name (which is the default).
        restart: How a crashed driver is restarted; ``RestartPolicy()`` when ``None``.
        flush_timeout: Seconds each end-of-turn flush (the store's and the
            ``session/flush`` listeners') and each detach of a torn-down agent's
            session may take; ``math.inf`` for no bound.
        retry: See above; no retries when ``None``.
        admission: See above; no shared limits when ``None``.
        config: See above.
    """
    check_store(store)
    check_kinds(restart=restart, retry=retry, admission=admission, config=config)
    cap = parallel_cap_of(max_parallel_tool_calls, config)
    check_prompt_option("system_prompt", system_prompt, PERSONA)
    model, global_tools = models_of(models), tools_of(tools)
    prompt_variables, order = variables_of(variables), tool_order_of(tool_order)
    flush_timeout = flush_timeout_of(flush_timeout)
    agents = AgentRegistry()
    hooks = HookBus(bus_of=bus_of, id_labelled=agents.id_labelled)
    registry = ToolRegistry(hooks, global_tools)
    sections = persona_sections(system_prompt)
    the_store: SessionStore = store if store is not None else MemoryStore()
    async with _store_open(the_store):
        runtime_slot: dict[str, Runtime] = {}
        services = LoopServices(
            hooks=hooks,
            tools=registry,
            models=_managed(model, retry, admission, hooks, runtime_slot),
            store=the_store,
            sections=sections,
            variables=prompt_variables,
            tool_order=order,
            max_parallel_tool_calls=cap,
            flush_timeout=flush_timeout,
        )
        supervising = _supervising(
            services, runtime_slot, agents, restart or RestartPolicy(), admission, config
        )
        async with supervising as runtime:
            yield runtime


@asynccontextmanager
async def _store_open(store: SessionStore) -> AsyncIterator[None]:
    """Hold *store* open while the runtime runs, and close it on the way out.

    The store's exit runs in this task, under whatever cancel the body's error
    came with (a deadline around the runtime): cut short, it raises Cancelled,
    which must not take the place of that error, or the cancel's scope swallows
    it and nothing comes out (an error, Ctrl-C). A failure to close while the
    body's error propagates is logged, not raised in its place.
    """
    managed = hasattr(type(store), "__aenter__")  # where `async with` looks it up
    if managed:
        await store.__aenter__()  # type: ignore[attr-defined]
    try:
        yield
    except BaseException as exc:
        try:
            await _close_store(store, managed=managed, error=exc)
        except BaseException as closing:
            if isinstance(exc, trio.Cancelled) or not only_cancels(closing):
                raise
        raise
    await _close_store(store, managed=managed, error=None)


async def _close_store(  # noqa: ASYNC910 - the close is awaited; one that failed before its first checkpoint is logged, and the body's error goes on
    store: SessionStore, *, managed: bool, error: BaseException | None
) -> None:
    """Close *store*: its exit, else its ``aclose``, told of the body's *error*, if any.

    Either way, a failure to close while the body's error propagates is logged, not
    raised: it would take that error's place (a Ctrl-C would come out as a store's error).
    """
    try:
        if managed:
            traceback = None if error is None else error.__traceback__
            await store.__aexit__(type(error) if error else None, error, traceback)  # type: ignore[attr-defined]
        else:
            await store.aclose()
    except Exception:
        if error is None:
            raise
        log.exception("closing the store failed while an error was propagating")


@asynccontextmanager
async def _supervising(
    services: LoopServices,
    runtime_slot: dict[str, Runtime],
    agents: AgentRegistry,
    restart: RestartPolicy,
    admission: AdmissionController | None,
    config: LoopConfig | None,
) -> AsyncIterator[Runtime]:
    """Run the body inside the runtime's nursery; dispose every agent on the way out.

    The nursery is an implementation detail: an exception raised in this task
    alone (by the body, or Ctrl-C landing while the configured agents start or
    the agents are disposed on the way out) comes out as raised, not wrapped in
    a group. So does Ctrl-C landing in an agent's task when nothing else failed,
    and either under a cancel of an enclosing scope, which every task ended with.
    A group stays a group when the runtime's own tasks failed too.
    """
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            services.end_runtime = nursery.cancel_scope.cancel
            runtime = Runtime(services, nursery, restart, agents=agents, admission=admission)
            runtime_slot["runtime"] = runtime
            try:
                try:
                    if config is not None:
                        await start_configured_agents(runtime, config)
                    yield runtime
                finally:
                    with trio.CancelScope(shield=True):
                        await runtime.aclose()
            except BaseException as exc:
                body_error = exc
                raise
    except BaseExceptionGroup as group:
        # A cancel of an enclosing scope comes along from every task it reached:
        # what is raised beside it decides, and that scope has nothing to catch then.
        failures = group.split(trio.Cancelled)[1]
        if failures is None:
            raise
        if (
            body_error is not None
            and len(failures.exceptions) == 1
            and _is_body_error(failures.exceptions[0], body_error)
        ):
            reraise(body_error)  # as raised, a group of the body's own too
        interrupt = lone_ending(failures, body_error)
        if interrupt is None:
            raise
        reraise(interrupt)


def _is_body_error(found: BaseException, body_error: BaseException) -> bool:
    """Whether *found*, in the nursery's group, is the body's error.

    A group the body raised comes back as a copy holding the same leaves: the
    nursery splits the Cancelled out of every group it collects, and the copy
    of a subclass without a ``derive`` of its own is a plain group.
    """
    if found is body_error:
        return True
    if not isinstance(found, BaseExceptionGroup) or not isinstance(body_error, BaseExceptionGroup):
        return False
    return found.message == body_error.message and _leaves(found) == _leaves(body_error)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[int]:
    """The identities of *group*'s leaf exceptions, in order."""
    found: list[int] = []
    for error in group.exceptions:
        found += _leaves(error) if isinstance(error, BaseExceptionGroup) else [id(error)]
    return found
