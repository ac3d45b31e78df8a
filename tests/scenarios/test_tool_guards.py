"""Tool guards: checks that may still deny a call every pre-execute listener allowed (R9.3)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import trio
import trio.testing

import retinue
from retinue._content import content_text
from retinue.hooks import Allow, Deny, HookBus
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import ToolExecution, ToolExecutionResult, ToolRegistry, tool
from retinue.tools._guards import Guard
from tests.helpers import DEADLINE, raise_stray_cancelled

ran: list[str] = []


@tool
async def write(path: str) -> str:
    """Write a file."""
    ran.append(path)
    return "written"


@pytest.fixture(autouse=True)
def _forget_runs() -> None:
    ran.clear()


def setup() -> tuple[HookBus, ToolRegistry]:
    hooks = HookBus()
    return hooks, ToolRegistry(hooks, [write])


def call(path: str = "/etc/passwd", agent_id: str | None = None) -> ToolExecution:
    return ToolExecution("call-1", "write", {"path": path}, agent_id=agent_id)


def no_etc(execution: ToolExecution) -> Deny | None:
    path = execution.arguments["path"]  # type: ignore[index, call-overload]
    return Deny("/etc is read-only") if str(path).startswith("/etc") else None


def text_of(result: ToolExecutionResult) -> str:
    return content_text(result.content)


async def test_a_guard_denies_a_call_a_listener_allowed_without_asking_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3: after ``allow`` a registered guard may still deny; a listener that allows
    without calling ``next`` cannot waive it. The denial goes through post-execute."""
    with trio.fail_after(DEADLINE):
        hooks, registry = setup()
        hooks.on("tools/pre-execute", lambda *_: Allow())
        post: list[str] = []

        async def record(
            execution: object, result: ToolExecutionResult, call_next: object
        ) -> object:
            post.append(text_of(result))
            return await call_next()  # type: ignore[operator]

        hooks.on("tools/post-execute", record)
        registry.guard(no_etc)
        denied = await registry.execute(call("/etc/passwd"))
        allowed = await registry.execute(call("/tmp/x"))
        assert (text_of(denied), denied.is_error) == ("Error: /etc is read-only", True)
        assert (text_of(allowed), allowed.is_error) == ("written", False)
        assert ran == ["/tmp/x"]
        assert post == ["Error: /etc is read-only", "written"]


async def test_a_guard_is_asked_only_once_the_listeners_allowed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3: a listener's denial stands and no guard is asked; an async guard is awaited."""
    with trio.fail_after(DEADLINE):
        hooks, registry = setup()
        asked: list[str] = []

        async def guard(execution: ToolExecution) -> Deny | None:
            asked.append(execution.call_id)
            await trio.lowlevel.checkpoint()
            return Deny("guarded")

        registry.guard(guard)
        assert text_of(await registry.execute(call())) == "Error: guarded"
        hooks.on("tools/pre-execute", lambda *_: Deny("listener says no"))
        assert text_of(await registry.execute(call())) == "Error: listener says no"
        assert asked == ["call-1"]
        assert ran == []


@pytest.mark.parametrize(
    ("verdict", "message"),
    [
        (RuntimeError("policy store offline"), "Error: policy store offline"),
        (
            Allow(),
            (
                f"Error: a tool guard ({__name__}.test_a_guard_that_fails_fails_the_call_"
                "without_running_it.<locals>.guard) returned Allow: a guard returns None or a Deny"
            ),
        ),
    ],
)
async def test_a_guard_that_fails_fails_the_call_without_running_it(
    autojump_clock: trio.testing.MockClock, verdict: object, message: str
) -> None:
    """R9.3: a guard that raises, or returns anything but ``None`` or a ``Deny``, gives a
    final error result: the body does not run and post-execute is skipped."""
    with trio.fail_after(DEADLINE):
        hooks, registry = setup()
        post: list[object] = []
        hooks.on("tools/post-execute", lambda *args: post.append(args))

        def guard(_execution: ToolExecution) -> object:
            if isinstance(verdict, Exception):
                raise verdict
            return verdict

        registry.guard(guard)  # type: ignore[arg-type]
        prepared = await registry.prepare(call("/tmp/x"))
        assert not prepared.needs_post_execute
        result = await registry.execute(call("/tmp/x"))
        assert (text_of(result), result.is_error) == (message, True)
        assert ran == []
        assert post == []


def _exhausted_guard(_execution: ToolExecution) -> Deny | None:
    return next(iter(()))


async def _async_exhausted_guard(_execution: ToolExecution) -> Deny | None:
    await trio.lowlevel.checkpoint()
    return next(iter(()))


@pytest.mark.parametrize("guard", [_exhausted_guard, _async_exhausted_guard], ids=["sync", "async"])
async def test_a_guard_raising_stop_iteration_names_the_guard(
    autojump_clock: trio.testing.MockClock, guard: Guard
) -> None:
    """R9.3: the call's error names the guard that raised StopIteration, not "coroutine raised
    StopIteration", which names a coroutine a sync guard does not have, and no async one."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        registry.guard(guard)
        result = await registry.execute(call("/tmp/x"))
        named = f"Error: a tool guard ({__name__}.{guard.__name__}) raised StopIteration"
        assert (text_of(result), result.is_error) == (named, True)
        assert ran == []


async def test_a_guard_raising_a_stray_cancel_fails_only_its_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3: a guard raising ``trio.Cancelled`` while nothing is cancelled fails the call
    as an error result; the caller goes on."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()

        async def guard(_execution: ToolExecution) -> Deny | None:
            await raise_stray_cancelled()
            return None

        registry.guard(guard)
        result = await registry.execute(call("/tmp/x"))
        assert result.is_error
        assert "trio.Cancelled" in text_of(result)
        assert ran == []


async def test_a_scoped_guard_watches_its_agent_only_until_unregistered_or_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3: a guard registered for one agent denies that agent's calls only; unregistering
    it, or dropping the agent's scope, lets the calls through again."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        unregister = registry.guard(no_etc, agent="a1")
        assert text_of(await registry.execute(call(agent_id="a1"))) == "Error: /etc is read-only"
        assert text_of(await registry.execute(call(agent_id="a2"))) == "written"
        unregister()
        unregister()
        assert text_of(await registry.execute(call(agent_id="a1"))) == "written"
        registry.guard(no_etc, agent="a1")
        registry.drop_scope("a1")
        assert text_of(await registry.execute(call(agent_id="a1"))) == "written"


async def test_guards_are_asked_in_registration_order_scoped_or_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3: global and scoped guards are asked in the order they were registered (as
    listeners are): the first denial is the one the model sees."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        asked: list[str] = []

        def denying(name: str) -> Callable[[ToolExecution], Deny]:
            def guard(_execution: ToolExecution) -> Deny:
                asked.append(name)
                return Deny(name)

            return guard

        registry.guard(denying("scoped first"), agent="a1")
        registry.guard(denying("global second"))
        assert text_of(await registry.execute(call(agent_id="a1"))) == "Error: scoped first"
        assert text_of(await registry.execute(call(agent_id="a2"))) == "Error: global second"
        assert asked == ["scoped first", "global second"]


async def test_unregistering_a_guard_twice_leaves_its_second_registration_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A guard registered twice stays until both are unregistered: calling one remover
    again does not remove the other registration."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        first = registry.guard(no_etc)
        registry.guard(no_etc)
        first()
        first()
        assert text_of(await registry.execute(call())) == "Error: /etc is read-only"


def test_a_guard_must_be_callable() -> None:
    """A guard that is not callable is refused when it is registered."""
    _, registry = setup()
    with pytest.raises(TypeError, match="tool guards must be callable, got a value of type str"):
        registry.guard("no")  # type: ignore[arg-type]


def _denying_generator(_execution: ToolExecution) -> Iterator[Deny]:
    yield Deny("never asked")


async def _denying_async_generator(_execution: ToolExecution) -> AsyncIterator[Deny]:
    yield Deny("never asked")


@pytest.mark.parametrize("guard", [_denying_generator, _denying_async_generator])
def test_a_generator_function_guard_is_refused_when_registered(guard: object) -> None:
    """R9.3: a generator function's calls only make a generator, so every call would fail: it
    is refused when registered, naming it, as ``HookBus.on`` refuses such a listener."""
    _, registry = setup()
    named = f"tool guards are called, not iterated: {__name__}.{getattr(guard, '__name__', '')} "
    with pytest.raises(TypeError, match=re.escape(f"{named}is a generator function")):
        registry.guard(guard)  # type: ignore[arg-type]


async def test_a_runtime_guard_denies_an_agents_call_and_the_model_sees_the_reason(
    autojump_clock: object,
) -> None:
    """R9.3: ``rt.tools.guard`` applies to every agent's calls: the denied call's result
    in the log is the guard's reason, and the turn completes."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("write", '{"path": "/etc/hosts"}')]), Reply("could not")]
    )
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model, tools=[write]) as rt:
            rt.hooks.on("tools/pre-execute", lambda *_: Allow())
            rt.tools.guard(no_etc)
            agent = await rt.create_agent("w", retinue.AgentOptions(model="scripted"))
            result = await agent.ask("write it")
    assert result.reason.kind == "completed"
    [logged] = [e.data for e in agent.session.events if e.type == "tool/result"]
    assert content_text(logged.content) == "Error: /etc is read-only"  # type: ignore[union-attr]
    assert ran == []


class _CountedId(str):
    """An agent id that counts every comparison and hash made with it: work done on it."""

    __slots__ = ()
    touches: list[str] = []  # one shared tally, reset per test

    def __eq__(self, other: object) -> bool:
        _CountedId.touches.append(str(self))
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        _CountedId.touches.append(str(self))
        return str.__ne__(self, other)

    def __hash__(self) -> int:
        _CountedId.touches.append(str(self))
        return str.__hash__(self)


def with_others_guards(registry: ToolRegistry, others: int) -> list[str]:
    """Register one spying guard for each of *others* agents; the list they record into."""
    asked: list[str] = []
    for index in range(others):
        agent = _CountedId(f"other-{index}")
        registry.guard(lambda execution: asked.append(str(execution.agent_id)), agent=agent)
    _CountedId.touches.clear()
    return asked


async def test_a_call_asks_only_its_own_and_global_guards_touching_no_other_agents(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call's guards cost what applies to it: with a thousand other agents' guards,
    a call asks the global guards and its agent's own, in registration order, and
    neither asks nor even compares a scope with any other agent's guard."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        asked: list[str] = []

        def spy(name: str) -> Callable[[ToolExecution], None]:
            return lambda _execution: asked.append(name)

        registry.guard(spy("global first"))
        others_asked = with_others_guards(registry, 1000)
        registry.guard(spy("mine"), agent="mine")
        registry.guard(spy("global last"))
        _CountedId.touches.clear()
        assert text_of(await registry.execute(call("/tmp/x", agent_id="mine"))) == "written"
        assert text_of(await registry.execute(call("/tmp/x", agent_id="bare"))) == "written"
        assert asked == ["global first", "mine", "global last", "global first", "global last"]
        assert others_asked == []
        assert _CountedId.touches == []


async def test_a_call_of_an_agent_without_guards_asks_none_among_many_scoped_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With only other agents' guards registered, an agent without any is asked nothing
    and no other agent's guard is touched; one guard of its own is the only one asked."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        others_asked = with_others_guards(registry, 1000)
        assert text_of(await registry.execute(call(agent_id="bare"))) == "written"
        registry.guard(no_etc, agent="guarded")
        assert (
            text_of(await registry.execute(call(agent_id="guarded"))) == "Error: /etc is read-only"
        )
        assert others_asked == []
        assert _CountedId.touches == []


async def test_registering_and_removing_a_guard_touches_no_other_agents_guards(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Registering, unregistering and dropping an agent's guards cost the same however
    many other agents have guards: no other agent's scope is hashed or compared."""
    with trio.fail_after(DEADLINE):
        _, registry = setup()
        others_asked = with_others_guards(registry, 1000)
        for _ in range(3):
            registry.guard(no_etc, agent="newcomer")()
            registry.guard(no_etc)()
            registry.guard(no_etc, agent="newcomer")
            registry.drop_scope("newcomer")
            registry.drop_scope("never-guarded")
        assert _CountedId.touches == []
        assert text_of(await registry.execute(call(agent_id="newcomer"))) == "written"
        assert others_asked == []
