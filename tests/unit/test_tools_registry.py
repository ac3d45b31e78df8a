"""Tool registry views, canonical schema order and execution-mode classification (R9.3, R9.8)."""

from __future__ import annotations

import gc
import re
import weakref
from collections.abc import Callable

import attrs
import pytest

from retinue._errors import ConfigError
from retinue._lossless import FrozenDict, JsonValue
from retinue.hooks import HookBus
from retinue.tools import Tool, ToolExecution, ToolRegistry, tool


def make(name: str, *, parallel_safe: bool | Callable[[JsonValue], object] = False) -> Tool:
    def body(path: str = "") -> str:
        return path

    return tool(name=name, description=f"{name} tool", parallel_safe=parallel_safe)(body)


def mode(
    registry: ToolRegistry, name: str, arguments: JsonValue = None, agent_id: str | None = None
) -> str:
    args: JsonValue = FrozenDict() if arguments is None else arguments
    return registry.execution_mode(ToolExecution("c1", name, args, agent_id=agent_id))


@attrs.frozen
class Handle:
    id: str


# -- execution mode (R9.8) -----------------------------------------------------


def test_execution_mode_is_parallel_only_for_an_explicit_true() -> None:
    """R9.8: only ``parallel_safe=True`` makes a call parallel; a missing declaration is exclusive."""
    registry = ToolRegistry(HookBus(), [make("safe", parallel_safe=True), make("plain")])
    assert mode(registry, "safe") == "parallel"
    assert mode(registry, "plain") == "exclusive"


@pytest.mark.parametrize("verdict", [False, 1, "yes", [True], None])
def test_execution_mode_is_exclusive_for_any_classifier_value_but_true(verdict: object) -> None:
    """R9.8: a classifier returning anything but exactly True (even truthy values) means exclusive."""
    registry = ToolRegistry(HookBus(), [make("t", parallel_safe=lambda _args: verdict)])
    assert mode(registry, "t") == "exclusive"


def test_execution_mode_classifier_sees_the_frozen_arguments() -> None:
    """R9.8: the classifier is a pure function of the call's arguments."""
    seen: list[object] = []

    def classify(arguments: JsonValue) -> bool:
        seen.append(arguments)
        return isinstance(arguments, FrozenDict) and arguments.get("path") == "/tmp"

    registry = ToolRegistry(HookBus(), [make("read", parallel_safe=classify)])
    assert mode(registry, "read", {"path": "/tmp"}) == "parallel"
    assert mode(registry, "read", {"path": "/etc"}) == "exclusive"
    assert seen == [{"path": "/tmp"}, {"path": "/etc"}]
    assert all(isinstance(arguments, FrozenDict) for arguments in seen)


def test_execution_mode_is_exclusive_when_the_classifier_raises() -> None:
    """R9.8: a raising classifier never fails the step; the call is exclusive."""

    def classify(_arguments: JsonValue) -> bool:
        raise RuntimeError("boom")

    registry = ToolRegistry(HookBus(), [make("t", parallel_safe=classify)])
    assert mode(registry, "t") == "exclusive"


class _ClassifierAbort(BaseException):
    """A BaseException of the user's own, as a classifier might raise."""


@pytest.mark.parametrize("raised", [SystemExit(2), _ClassifierAbort()], ids=repr)
def test_execution_mode_is_exclusive_when_the_classifier_raises_a_base_exception(
    raised: BaseException,
) -> None:
    """R9.8: a classifier's ``SystemExit`` or own ``BaseException`` is its failure, the call
    exclusive, not a raise out of a classification that never raises (the step's end)."""

    def classify(_arguments: JsonValue) -> bool:
        raise raised

    registry = ToolRegistry(HookBus(), [make("t", parallel_safe=classify)])
    assert mode(registry, "t") == "exclusive"


def test_execution_mode_lets_ctrl_c_in_a_classifier_pass_on() -> None:
    """R9.8: Ctrl-C is no classifier's failure: it reaches the runtime."""

    def classify(_arguments: JsonValue) -> bool:
        raise KeyboardInterrupt

    registry = ToolRegistry(HookBus(), [make("t", parallel_safe=classify)])
    with pytest.raises(KeyboardInterrupt):
        mode(registry, "t")


def test_execution_mode_is_exclusive_for_an_async_classifier() -> None:
    """R9.8: the classifier is synchronous; a coroutine is not True (and is closed, not leaked)."""

    async def classify(_arguments: JsonValue) -> bool:
        return True

    registry = ToolRegistry(HookBus(), [make("t", parallel_safe=classify)])
    assert mode(registry, "t") == "exclusive"


def test_execution_mode_is_exclusive_for_unknown_tools_and_invalid_arguments() -> None:
    """R9.8: an unknown tool, invalid arguments or raw-string arguments mean exclusive."""
    registry = ToolRegistry(HookBus(), [make("safe", parallel_safe=True)])
    assert mode(registry, "missing") == "exclusive"
    assert mode(registry, "safe", {"path": 3}) == "exclusive"
    assert mode(registry, "safe", '{"path": ') == "exclusive"
    assert mode(registry, "safe", {"path": "ok"}) == "parallel"


def test_execution_mode_uses_the_callers_view() -> None:
    """R9.8: an agent-scoped tool's declaration decides for that agent only."""
    registry = ToolRegistry(HookBus(), [make("t")])
    registry.add(make("t", parallel_safe=True), agent="a")
    assert mode(registry, "t", agent_id="a") == "parallel"
    assert mode(registry, "t", agent_id="b") == "exclusive"


# -- views (R9.3 step 3) -------------------------------------------------------


def test_registry_scoped_tool_shadows_the_global_one_for_its_agent_only() -> None:
    """R9.3: a scoped tool shadows a global tool of the same name for that agent only."""
    shared, private = make("t"), make("t", parallel_safe=True)
    registry = ToolRegistry(HookBus(), [shared])
    unregister = registry.add(private, agent=Handle("a"))
    assert registry.get("t", "a") is private
    assert registry.get("t", "b") is shared
    assert registry.get("t") is shared
    unregister()
    unregister()
    assert registry.get("t", "a") is shared


def test_registry_refuses_a_duplicate_name_in_one_scope() -> None:
    """R9.3: one name resolves to one tool per view, so a duplicate registration is refused."""
    registry = ToolRegistry(HookBus(), [make("t")])
    with pytest.raises(ConfigError, match='"t"'):
        registry.add(make("t"))
    registry.add(make("t"), agent="a")
    with pytest.raises(ConfigError, match='"t"'):
        registry.add(make("t"), agent="a")
    with pytest.raises(ConfigError, match='"u"'):
        ToolRegistry(HookBus(), [make("u"), make("u")])


@pytest.mark.parametrize(
    ("hooks", "tools", "message"),
    [
        (None, (), "ToolRegistry's hooks must be a retinue.hooks.HookBus, got None"),
        (HookBus(), 5, "ToolRegistry's tools must be an iterable of Tools, got 5"),
    ],
    ids=["hooks", "tools"],
)
def test_registry_refuses_hooks_or_tools_of_the_wrong_type_naming_them(
    hooks: object, tools: object, message: str
) -> None:
    """R9.1: a registry's bus and tools are checked when it is built: a TypeError naming
    the argument, not an AttributeError when it first watches its seams or a bare
    "not iterable"."""
    with pytest.raises(TypeError, match=re.escape(message)):
        ToolRegistry(hooks, tools)  # type: ignore[arg-type]


def test_registry_unregister_leaves_a_replacement_alone() -> None:
    """R9.3: a stale unregister function never removes a tool registered after it."""
    registry = ToolRegistry(HookBus())
    first = registry.add(make("t"))
    first()
    second = make("t")
    registry.add(second)
    first()
    assert registry.get("t") is second


@pytest.mark.parametrize("agent", [None, "a"], ids=["global", "scoped"])
def test_registry_unregister_leaves_the_same_tool_registered_again_alone(agent: str | None) -> None:
    """R9.3: unregistering is idempotent per registration: a stale unregister function
    leaves the very Tool registered anew after it in place (another tool keeps the agent's
    own table in place)."""
    registry = ToolRegistry(HookBus())
    registry.add(make("kept"), agent=agent)
    again = make("t")
    first = registry.add(again, agent=agent)
    first()
    second = registry.add(again, agent=agent)
    first()
    assert registry.get("t", agent) is again
    second()
    assert registry.get("t", agent) is None


# -- canonical order -----------------------------------------------------------


def names(schemas: tuple[object, ...]) -> list[str]:
    return [getattr(schema, "name", "?") for schema in schemas]


def test_schemas_are_sorted_by_name_by_default() -> None:
    """R7.51: without a configured order, tool schemas are in lexicographic name order."""
    registry = ToolRegistry(HookBus(), [make("write"), make("Bash"), make("read")])
    assert names(registry.schemas()) == ["Bash", "read", "write"]


def test_schemas_follow_a_configured_order_with_a_rest_slot() -> None:
    """R7.51: a configured order places listed tools; ``*`` holds the rest, sorted."""
    registry = ToolRegistry(HookBus(), [make(n) for n in ("d", "c", "b", "a", "e")])
    assert names(registry.schemas(order=["e", "*", "a"])) == ["e", "b", "c", "d", "a"]
    assert names(registry.schemas(order=["c"])) == ["c", "a", "b", "d", "e"]


def test_schemas_include_scoped_tools_in_the_agents_view_only() -> None:
    """R7.51: a scoped tool appears in its agent's schemas and may be named in a shared order."""
    registry = ToolRegistry(HookBus(), [make("b"), make("a")])
    registry.add(make("z"), agent="x")
    order = ["z", "*"]
    assert names(registry.schemas("x", order)) == ["z", "a", "b"]
    assert names(registry.schemas("y", order)) == ["a", "b"]


@pytest.mark.parametrize(
    ("order", "message"),
    [(["a", "nope"], '"nope"'), (["*", "a", "*"], '"\\*"'), (["a", "a"], '"a"')],
)
def test_schemas_refuse_an_invalid_configured_order(order: list[str], message: str) -> None:
    """R7.51: an unknown, repeated or doubled rest name in the configured order is a ConfigError."""
    registry = ToolRegistry(HookBus(), [make("a")])
    with pytest.raises(ConfigError, match=message):
        registry.schemas(order=order)


@pytest.mark.parametrize(
    ("order", "message"),
    [
        ("ab", "be a sequence of tool names, got 'ab'"),
        (["a", 1], "hold tool names, got 1"),
        (["a", ["b"]], "hold tool names, got ['b']"),
    ],
    ids=["str", "int", "unhashable"],
)
def test_schemas_refuse_an_order_that_is_no_sequence_of_names(
    order: list[str], message: str
) -> None:
    """R7.51: a str given as the order is refused as such, not read as one-letter tool
    names ("unknown tool 'a'"), and so is an item that is no name."""
    registry = ToolRegistry(HookBus(), [make("a"), make("b")])
    assert names(registry.schemas(None, ["a", "b"])) == ["a", "b"]  # cached: "ab" is no hit
    with pytest.raises(ConfigError, match=f"^tool order must {re.escape(message)}$"):
        registry.schemas(None, order)


@pytest.mark.parametrize("removal", ["unregister", "drop_scope"])
def test_schemas_skip_an_ordered_tool_once_it_is_gone(removal: str) -> None:
    """R7.51: a listed tool unregistered (or dropped with its agent's scope) after a request
    saw it is skipped in every view, and fails no other agent's steps.
    """
    registry = ToolRegistry(HookBus(), [make("b"), make("a")])
    unregister = registry.add(make("z"), agent="x")
    order = ["z", "*"]
    assert names(registry.schemas("y", order)) == ["a", "b"]
    if removal == "unregister":
        unregister()
    else:
        registry.drop_scope("x")
    assert names(registry.schemas("y", order)) == ["a", "b"]
    assert names(registry.schemas("x", order)) == ["a", "b"]
    with pytest.raises(ConfigError, match='"nope"'):
        registry.schemas("y", ["nope", *order])


def test_schemas_of_agents_without_scoped_tools_share_one_cached_entry() -> None:
    """R7.51: agents without scoped tools share the global view's schemas (one cache entry for
    all of them, not one per agent ever served); an agent with scoped tools has its own.
    """
    registry = ToolRegistry(HookBus(), [make("b"), make("a")])
    shared = registry.schemas(None, ["b"])
    assert registry.schemas("x", ["b"]) is shared
    assert registry.schemas("y", ["b"]) is shared
    registry.add(make("z"), agent="x")
    assert names(registry.schemas("x", ["b"])) == ["b", "a", "z"]
    assert registry.schemas("y", ["b"]) is registry.schemas(None, ["b"])


def test_schemas_carry_the_model_facing_part_only() -> None:
    """R9.7: only name, description and parameters reach the model."""
    registry = ToolRegistry(HookBus(), [make("t")])
    (schema,) = registry.schemas()
    assert (schema.name, schema.description) == ("t", "t tool")
    assert schema.parameters == registry.get("t").parameters  # type: ignore[union-attr]


# -- lifetime --------------------------------------------------------------------


def test_a_registry_goes_with_the_last_reference_to_it_and_its_bus_goes_on() -> None:
    """The bus's watch of the pipeline seams does not keep the registry, nor its tools, alive;
    the bus then still takes listeners on those seams."""
    gc.collect()
    gc.disable()
    try:
        bus = HookBus()
        registry = ToolRegistry(bus, tools=[make("read")])
        kept = weakref.ref(registry)
        del registry
        assert kept() is None
    finally:
        gc.enable()
    heard: list[object] = []
    unregister = bus.on("tools/result", lambda _execution, result: heard.append(result))
    bus.emit("tools/result", "execution", "result")
    unregister()
    assert heard == ["result"]


@pytest.mark.parametrize(
    ("agent", "shown"),
    [(None, ["b", "c", "d"]), ("x", ["b", "c", "d", "kept"])],
    ids=["global", "scoped"],
)
def test_schemas_show_a_tool_registered_after_they_were_read(
    agent: str | None, shown: list[str]
) -> None:
    """R7.51, R9.3: a tool registered once a view's schemas were read is in that view's next
    schemas, in its place: the schemas read before it do not stand in for them."""
    registry = ToolRegistry(HookBus(), [make("b"), make("d")])
    registry.add(make("kept"), agent="x")
    order = ["d", "*"]
    assert "c" not in names(registry.schemas(agent)) + names(registry.schemas(agent, order))
    registry.add(make("c"), agent=agent)
    assert names(registry.schemas(agent)) == shown
    assert names(registry.schemas(agent, order)) == ["d", *(name for name in shown if name != "d")]
