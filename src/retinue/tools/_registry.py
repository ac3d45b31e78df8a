"""The tool registry: views, canonical order, modes and the never-raising pipeline (R9.1-R9.8)."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import final

import attrs
import trio

from retinue._errors import ConfigError
from retinue._lossless import FrozenDict, freeze_json
from retinue._request import ToolSchema
from retinue.hooks import HookBus

from ._body import ToolThreads, run_body, unreadable_arguments
from ._execution import (
    PreparedCall,
    ToolExecution,
    ToolExecutionResult,
    check_result,
    exception_result,
)
from ._guards import Guard, Guards
from ._parallel import parallel_for
from ._pipeline_hooks import (
    UNKNOWN_TOOL,
    check_dispatched,
    dispatch_takes,
    post_execute,
    pre_execute,
    unknown_tool,
)
from ._tool import ExecutionMode, Tool
from ._tool_order import ordered_names

__all__ = ["UNKNOWN_TOOL", "ToolRegistry"]

log = logging.getLogger("retinue.tools")
# The seams of a call's pipeline. While none of them has a listener, the usual case,
# a call does not ask the bus about each one in turn.
_PIPELINE_SEAMS = ("tools/pre-execute", "tools/execute", "tools/post-execute", "tools/result")


def _index(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Index the initial global tools by name, refusing duplicates and non-tools."""
    table: dict[str, Tool] = {}
    try:
        items = iter(tools)
    except TypeError:
        raise TypeError(
            f"ToolRegistry's tools must be an iterable of Tools, got {tools!r}"
        ) from None
    for item in items:
        if not isinstance(item, Tool):
            raise TypeError(f"expected a Tool, got {type(item).__name__}")
        if item.name in table:
            raise ConfigError(f'tool "{item.name}" is already registered globally')
        table[item.name] = item
    return table


def _check_hooks(_registry: object, _attribute: attrs.Attribute[HookBus], hooks: object) -> None:
    # Checked when built: the registry watches its seams at once, where a stand-in
    # would fail as an AttributeError naming neither the registry nor the argument.
    if not isinstance(hooks, HookBus):
        raise TypeError(f"ToolRegistry's hooks must be a retinue.hooks.HookBus, got {hooks!r}")


def _seams_watcher(registry: weakref.ref[ToolRegistry]) -> Callable[[], None]:
    """The bus's watcher of the pipeline seams for *registry*, which it holds weakly.

    The registry holds its bus, and the bus its watchers: a watcher holding the
    registry (its bound method) would tie the two, with every tool, in a cycle
    left to the cyclic collector.
    """

    def note_seams() -> None:
        live = registry()
        if live is not None:
            live._note_seams()

    return note_seams


@final
@attrs.define(eq=False)
class ToolRegistry:
    """The tools every agent of a runtime can call, and the pipeline that runs them.

    Tools are global or scoped to one agent; a scoped tool shadows a global one
    of the same name for that agent only (R9.3). :meth:`execute` (or its
    stages :meth:`prepare`, :meth:`dispatch`, :meth:`finish`) never raises for
    a tool or policy failure (R9.2): every failure becomes an error result.
    Every seam is dispatched with ``scope=execution.agent_id`` (R6.5), and a
    tool or guard is scoped to an agent as :attr:`hooks` scopes a listener
    (:meth:`HookBus.scope_of <retinue.hooks.HookBus.scope_of>`).
    """

    hooks: HookBus = attrs.field(validator=_check_hooks)
    """The bus the ``tools/*`` seams are dispatched on."""
    _global: dict[str, Tool] = attrs.field(default=(), alias="tools", converter=_index)
    _scoped: dict[str, dict[str, Tool]] = attrs.field(factory=dict, init=False)
    # Canonical schema tuples by (scope, order); cleared on every registration change,
    # so the per-step header comparison sees the same tuple and compares by identity.
    # Agents without scoped tools share the global view's entry (scope None): an entry
    # per agent ever served would outlive the agent.
    _schemas: dict[tuple[str | None, tuple[str, ...] | None], tuple[ToolSchema, ...]] = attrs.field(
        factory=dict, init=False
    )
    # Names of a tool order seen registered: one of them missing later was unregistered
    # (or dropped with its agent) and is skipped; one never seen is a typo.
    _order_names_seen: set[str] = attrs.field(factory=set, init=False)
    # Results a dispatch produced as final (post-execute skipped), by identity.
    _final: dict[int, weakref.ref[ToolExecutionResult]] = attrs.field(factory=dict, init=False)
    # The worker threads of sync bodies: slots held by the calling tasks, and the
    # threads themselves, which abandoned bodies hold until they return.
    _threads: ToolThreads = attrs.field(factory=ToolThreads, init=False)
    _guards: Guards = attrs.field(factory=Guards, init=False)
    # Whether any pipeline seam has a listener (of any scope); the bus keeps it current
    # through a watch, which runs as a seam gains its first or loses its last listener.
    _seams_heard: bool = attrs.field(default=True, init=False)

    def __attrs_post_init__(self) -> None:
        note_seams = _seams_watcher(weakref.ref(self))
        for name in _PIPELINE_SEAMS:
            self.hooks.watch(name, note_seams)

    def _note_seams(self) -> None:
        hooks = self.hooks
        self._seams_heard = any(hooks.has_listeners(name) for name in _PIPELINE_SEAMS)

    def __repr__(self) -> str:
        scoped = sum(len(tools) for tools in self._scoped.values())
        return f"<ToolRegistry global={len(self._global)} scoped={scoped}>"

    # -- registration and views ------------------------------------------------

    def add(self, tool: Tool, *, agent: object = None) -> Callable[[], None]:
        """Register *tool*, globally or for *agent* (a handle or an id); never blocks.

        Returns an idempotent unregister function.

        Raises:
            ConfigError: the name is already registered in that scope.
            TypeError: *tool* is not a :class:`Tool`, or *agent* is not an
                agent handle, an agent id or ``None``.
            ValueError: *agent* is a handle of another runtime's agent
                (:meth:`HookBus.scope_of <retinue.hooks.HookBus.scope_of>`).
            AgentDisposedError: *agent* is a disposed handle.
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"expected a Tool, got {type(tool).__name__}")
        scope = self.hooks.scope_of(agent)
        table = self._global if scope is None else self._scoped.setdefault(scope, {})
        if tool.name in table:
            where = "globally" if scope is None else f"for agent {scope!r}"
            raise ConfigError(f'tool "{tool.name}" is already registered {where}')
        table[tool.name] = tool
        self._schemas.clear()
        # Per registration: the same Tool registered again is another one, left alone.
        registered = True

        def unregister() -> None:
            nonlocal registered
            if registered and table.get(tool.name) is tool:
                registered = False
                del table[tool.name]
                self._schemas.clear()
                if scope is not None and not table and self._scoped.get(scope) is table:
                    del self._scoped[scope]

        return unregister

    def drop_scope(self, agent_id: str) -> None:
        """Unregister every tool and guard scoped to *agent_id* (its teardown); never blocks."""
        self._guards.drop_scope(agent_id)
        if self._scoped.pop(agent_id, None) is not None:
            self._schemas.clear()

    def guard(self, check: Guard, *, agent: object = None) -> Callable[[], None]:
        """Register a guard that may deny calls, globally or for *agent*; never blocks.

        *check* gets each call's :class:`ToolExecution` (its arguments frozen)
        after the ``tools/pre-execute`` listeners allowed it, and returns
        ``None`` to let it run or a :class:`~retinue.hooks.Deny` to refuse it;
        it may be async. Unlike a listener, no other listener's ``Allow`` can
        skip it (R9.3). A denial goes through post-execute like a listener's;
        a guard that raises, or returns anything else, fails the call without
        running it. Returns an idempotent unregister function.

        Raises:
            TypeError: *check* is not callable, or *agent* is not an agent
                handle, an agent id or ``None``.
            ValueError: *agent* is a handle of another runtime's agent
                (:meth:`HookBus.scope_of <retinue.hooks.HookBus.scope_of>`).
            AgentDisposedError: *agent* is a disposed handle.
        """
        return self._guards.add(check, self.hooks.scope_of(agent))

    def get(self, name: str, agent_id: str | None = None) -> Tool | None:
        """The tool *name* resolves to in *agent_id*'s view (scoped first), or ``None``."""
        scoped = self._scoped
        if agent_id in scoped and name in scoped[agent_id]:
            return scoped[agent_id][name]
        return self._global.get(name)

    def _view(self, agent_id: str | None) -> dict[str, Tool]:
        view = dict(self._global)
        if agent_id is not None:
            view.update(self._scoped.get(agent_id, {}))
        return view

    def _known(self, name: str) -> bool:
        return name in self._global or any(name in tools for tools in self._scoped.values())

    def schemas(
        self, agent_id: str | None = None, order: Iterable[str] | None = None
    ) -> tuple[ToolSchema, ...]:
        """The schemas of *agent_id*'s view, in canonical order; never blocks.

        Without *order*, tools are sorted by name. With it, tools appear in the
        listed order and the rest, sorted by name, fill the one ``"*"`` slot
        (or follow the list when it has none). A listed name missing from the
        view is skipped: registered only for another agent, or unregistered
        since an earlier call saw it.

        Raises:
            ConfigError: *order* names a tool no call has seen registered in any
                view (a typo), repeats a name, has more than one ``"*"``, is a
                str, or holds something that is no str.
        """
        scope = agent_id if agent_id in self._scoped else None
        if isinstance(order, str):
            # Before the cache: as a tuple, "ab" is the key of the order ["a", "b"].
            raise ConfigError(f"tool order must be a sequence of tool names, got {order!r}")
        # Read once: an iterator would be spent by the cache key, leaving no order to follow.
        listed = None if order is None else tuple(order)
        key = (scope, listed)
        try:
            cached = self._schemas.get(key)
        except TypeError:  # an unhashable item: no name, which _ordered refuses
            cached = None
        if cached is None:
            view, check = self._view(scope), self._check_order_name
            names = sorted(view) if listed is None else ordered_names(view, listed, check)
            cached = self._schemas[key] = tuple(view[name].schema for name in names)
        return cached

    def _check_order_name(self, name: str, view: Mapping[str, Tool]) -> None:
        if name in self._order_names_seen:
            return
        if name not in view and not self._known(name):
            raise ConfigError(f'tool order names unknown tool "{name}"')
        self._order_names_seen.add(name)

    def execution_mode(self, execution: ToolExecution) -> ExecutionMode:
        """Classify a call (R9.8); pure and synchronous, never raises.

        Only a tool declared ``parallel_safe=True``, or whose classifier returns
        exactly ``True`` for valid arguments, runs in parallel. An unknown tool,
        invalid arguments, any other value and a raising classifier (a
        ``SystemExit`` too; only Ctrl-C passes on) mean ``"exclusive"``.
        """
        return "exclusive" if self.parallel_tool(execution) is None else "parallel"

    def parallel_tool(self, execution: ToolExecution) -> Tool | None:
        """:meth:`execution_mode` naming the tool: the one a parallel call resolves to, else ``None``.

        That tool found the call's arguments valid: given to :meth:`prepare` as
        ``checked_by``, it spares the body a second check while it still resolves.
        """
        # get(), written out here and in _run_tool: asked for every call.
        name, agent_id, scoped = execution.name, execution.agent_id, self._scoped
        if agent_id in scoped and name in scoped[agent_id]:
            tool: Tool | None = scoped[agent_id][name]
        else:
            tool = self._global.get(name)
        return parallel_for(tool, execution.arguments)

    # -- the pipeline ----------------------------------------------------------

    async def execute(self, execution: ToolExecution) -> ToolExecutionResult:
        """Run one call through every stage: prepare, dispatch if needed, finish.

        Waits for the hooks and the tool body. Always a checkpoint. Never
        raises for tool or policy failures (R9.2); ``Cancelled`` propagates and
        leaves no result.
        """
        prepared = await self.prepare(execution)
        result = await self.dispatch(prepared) if prepared.needs_dispatch else prepared.result
        assert result is not None
        return await self.finish(prepared, result)

    async def prepare(
        self, execution: ToolExecution, *, checkpoint: bool = True, checked_by: Tool | None = None
    ) -> PreparedCall:
        """Stages 1-2 (R9.3): freeze the arguments, run ``tools/pre-execute``, then the guards.

        Waits for the pre-execute listeners and the guards. A checkpoint unless *checkpoint* is
        false (a caller that has just checkpointed, like the step scheduler);
        never raises except ``Cancelled``. ``Deny`` and ``Ask`` (no approval
        service: R6.8) produce an error result that still goes through
        post-execute, as does a guard's ``Deny``; invalid arguments, a raising
        listener or guard, or a non-decision produce a final one. *checked_by* is
        the call's :meth:`parallel_tool`, if the caller classified it.
        """
        if checkpoint:
            await trio.lowlevel.checkpoint()
        arguments = execution.arguments
        if type(arguments) is not FrozenDict:  # the loop's parsed arguments are frozen
            try:
                frozen = freeze_json(arguments)
            except BaseException as exc:
                return PreparedCall(  # noqa: ASYNC910 - checkpoint=False: the caller has just checkpointed
                    execution, unreadable_arguments(execution, exc), needs_post_execute=False
                )
            if frozen is not arguments:
                execution = attrs.evolve(execution, arguments=frozen)
        if self._hears("tools/pre-execute", execution):
            prepared = await pre_execute(self.hooks, execution)
            if prepared.result is not None:
                return prepared
        if self._guards.watch(execution.agent_id):
            return await self._guards.prepared(execution)
        return PreparedCall(execution, checked_by=checked_by)  # noqa: ASYNC910 - checkpoint=False: the caller has just checkpointed

    def prepare_at_once(
        self, execution: ToolExecution, *, checked_by: Tool | None = None
    ) -> PreparedCall | None:
        """:meth:`prepare` with ``checkpoint=False``, spared its coroutine; never blocks.

        ``None`` when there are arguments to freeze, or a pre-execute listener or a
        guard to run: then the caller awaits :meth:`prepare`.
        """
        # _hears written out, as in dispatching: asked for every call.
        if (
            type(execution.arguments) is not FrozenDict
            or (self._seams_heard and self.hooks.hears("tools/pre-execute", execution.agent_id))
            or self._guards.watch(execution.agent_id)
        ):
            return None
        return PreparedCall(execution, checked_by=checked_by)

    def _hears(self, seam: str, execution: ToolExecution) -> bool:
        """Whether a listener of the pipeline *seam* applies to *execution*'s agent."""
        # _seams_heard first: while no pipeline seam has a listener, the bus is not asked.
        return self._seams_heard and self.hooks.hears(seam, execution.agent_id)

    async def dispatch(
        self,
        prepared: PreparedCall,
        *,
        body_results: MutableMapping[str, ToolExecutionResult | None] | None = None,
    ) -> ToolExecutionResult:
        """Stage 3 (R9.3): the ``tools/execute`` around-waterfall over the tool body.

        Waits for the wrappers and the body; this is the only stage the
        scheduler runs concurrently (R9.16). Always a checkpoint; never raises
        except ``Cancelled``. A raising wrapper, or one returning something
        other than a result for this call, yields a final error result.
        A prepared call with a pre-produced result returns that result.
        Given *body_results*, the body's own result is put in it under the
        call's id as soon as it returns, while the wrappers may yet run: a
        caller cancelled in a wrapper still knows whether the body ran.
        Without a ``tools/execute`` wrapper it is left as it is: the caller
        then has the body's result as it returns.
        """
        if prepared.result is not None:
            await trio.lowlevel.checkpoint()
            return prepared.result
        execution = prepared.execution
        if not self._hears("tools/execute", execution):
            result = await self._run_tool(prepared)
        else:

            async def innermost() -> ToolExecutionResult:
                result = await self._run_tool(prepared)
                if body_results is not None:
                    body_results[execution.call_id] = result
                return result

            try:
                result = await self.hooks.waterfall(
                    "tools/execute",
                    innermost,
                    execution,
                    scope=execution.agent_id,
                    takes=dispatch_takes(execution),
                )
                check_dispatched(execution, result)
            except Exception as exc:
                log.exception("tools/execute failed for %r", execution.name)
                await trio.lowlevel.checkpoint()
                return self._mark_final(exception_result(execution.call_id, exc))
        # An async body that never awaited, or arguments refused before the body ran,
        # left the call without a schedule point; shielded, so the result is kept.
        await trio.lowlevel.cancel_shielded_checkpoint()
        return result

    def dispatching(
        self,
        prepared: PreparedCall,
        *,
        body_results: MutableMapping[str, ToolExecutionResult | None] | None = None,
    ) -> Awaitable[ToolExecutionResult]:
        """:meth:`dispatch`, or without a ``tools/execute`` wrapper the body's own coroutine.

        That coroutine's result is the body's, which the caller has as it returns:
        *body_results* is filled only around a wrapper.
        """
        if prepared.result is None and not (
            self._seams_heard and self.hooks.hears("tools/execute", prepared.execution.agent_id)
        ):
            return self._run_tool(prepared)
        return self.dispatch(prepared, body_results=body_results)

    def _run_tool(self, prepared: PreparedCall) -> Awaitable[ToolExecutionResult]:
        """The innermost ``tools/execute`` step: the tool's body, or an unknown-tool error."""
        execution = prepared.execution
        # get(), written out as in parallel_tool.
        name, agent_id, scoped = execution.name, execution.agent_id, self._scoped
        if agent_id in scoped and name in scoped[agent_id]:
            tool: Tool | None = scoped[agent_id][name]
        else:
            tool = self._global.get(name)
        if tool is None:
            return unknown_tool(execution)
        # The arguments are frozen: the tool that found them valid would say so again.
        checked = tool is prepared.checked_by
        return run_body(tool, execution, self._threads, arguments_checked=checked)

    def _mark_final(self, result: ToolExecutionResult) -> ToolExecutionResult:
        key = id(result)
        self._final[key] = weakref.ref(result, lambda _ref: self._final.pop(key, None))
        return result

    def _is_final(self, result: ToolExecutionResult) -> bool:
        ref = self._final.get(id(result))
        return ref is not None and ref() is result

    async def finish(
        self, prepared: PreparedCall, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Stages 4-5 (R9.3): ``tools/post-execute``, validation, ``tools/result``.

        Waits for the post-execute listeners: a checkpoint when one runs, while
        without one it does not yield, so committing results adds no
        scheduling points. Never raises except ``Cancelled``. Post-execute is
        skipped for final results; a raising listener or a non-decision turns
        the result into an error result. ``tools/result`` observers are called
        synchronously and their failures are logged and ignored.
        """
        if self._needs_post_execute(prepared, result):
            result = await post_execute(self.hooks, prepared.execution, result)
        return self._checked_and_announced(prepared.execution, result)  # noqa: ASYNC910 - yields only when a post-execute listener runs

    def finish_at_once(
        self, prepared: PreparedCall, result: ToolExecutionResult
    ) -> ToolExecutionResult | None:
        """:meth:`finish`, spared its coroutine, when no post-execute listener has to see *result*.

        ``None`` otherwise: a step aborted after the body settled cannot run them
        any more, and the result must not bypass them.
        """
        # _seams_heard first, as _needs_post_execute asks it: a call spared for every call.
        if self._seams_heard and self._needs_post_execute(prepared, result):
            return None
        return self._checked_and_announced(prepared.execution, result)

    def _needs_post_execute(self, prepared: PreparedCall, result: ToolExecutionResult) -> bool:
        return (
            # Scoped: another agent's listener must not hold this agent's results back.
            self._hears("tools/post-execute", prepared.execution)
            and (prepared.result is None or prepared.needs_post_execute)
            and not self._is_final(result)
        )

    def _checked_and_announced(
        self, execution: ToolExecution, result: ToolExecutionResult
    ) -> ToolExecutionResult:
        """Validate the final result and tell ``tools/result`` observers."""
        try:
            check_result(result)
        except Exception as exc:
            log.exception("tool %r produced a result that is not lossless JSON", execution.name)
            result = exception_result(execution.call_id, exc)
        if self._seams_heard:
            self.hooks.emit("tools/result", execution, result, scope=execution.agent_id)
        return result
