"""The tool pipeline's seams around the body, end to end: lossless arguments, tools/pre-execute,
tools/post-execute, result validation and observers, and the whole contract (R9.1-R9.4, R6.8).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import trio
import trio.testing

from retinue._content import Text
from retinue._lossless import FrozenDict, JsonValue
from retinue._sources import HookContext
from retinue.hooks import Accept, Allow, Ask, Block, Deny
from retinue.session import ToolErrorInfo
from retinue.tools import PreparedCall, ToolExecution, ToolExecutionResult, tool
from tests.helpers import Next, unchecked
from tests.scenarios._tool_pipeline_kit import Seams, call, failed, setup, shape, text_of

# Sync tool bodies run in worker threads, where the virtual clock would fire tool timeouts
# spuriously, so most tests here run on the real clock: bound each one in real time. The
# slowest takes about 0.2 s.
pytestmark = pytest.mark.timeout(30)


# -- stage 1: lossless arguments -------------------------------------------------


async def test_prepare_refuses_arguments_that_are_not_lossless_json() -> None:
    """R9.3: non-JSON arguments give a final error result; pre- and post-execute are skipped."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    prepared = await registry.prepare(call(arguments={"text": {1, 2}}))  # type: ignore[dict-item]
    assert not prepared.needs_dispatch
    assert not prepared.needs_post_execute
    result = await registry.execute(call(arguments={"text": {1, 2}}))  # type: ignore[dict-item]
    assert shape(result) == failed(
        'invalid arguments for tool "echo": text is not JSON: set', "INVALID_ARGUMENTS"
    )
    assert seams.pre == []
    assert seams.post == []
    assert len(seams.results) == 1


async def test_prepare_freezes_arguments_before_any_seam_sees_them() -> None:
    """R9.1: listeners get one immutable execution with frozen arguments and a fresh token."""
    hooks, registry = setup()
    seen: list[ToolExecution] = []

    async def wrap(execution: ToolExecution, call_next: Next) -> object:
        seen.append(execution)
        return await call_next()

    seams = Seams().attach(hooks)
    hooks.on("tools/execute", wrap)
    raw: dict[str, object] = {"text": "hi"}
    first = await registry.execute(ToolExecution("call-1", "echo", raw))  # type: ignore[arg-type]
    raw["text"] = "mutated later"
    assert text_of(first) == "hi"
    (execution,) = seams.pre
    assert isinstance(execution.arguments, FrozenDict)
    with pytest.raises(TypeError):
        execution.arguments["text"] = "changed"
    assert seen == [execution]
    assert seams.results[0][0] == execution
    assert execution.token
    assert execution.token != call().token


# -- stage 2: tools/pre-execute ---------------------------------------------------


async def test_pre_execute_deny_skips_the_body_but_not_post_execute() -> None:
    """R9.3: a denial is an ``Error: <reason>`` result that still goes through post-execute."""
    ran: list[str] = []

    @tool
    def write(path: str) -> str:
        """Write."""
        ran.append(path)
        return "written"

    hooks, registry = setup(write)
    hooks.on("tools/pre-execute", lambda *_: Deny("read-only session"))
    seams = Seams().attach(hooks)
    prepared = await registry.prepare(call("write", {"path": "/x"}))
    assert not prepared.needs_dispatch
    assert prepared.needs_post_execute
    result = await registry.execute(call("write", {"path": "/x"}))
    assert shape(result) == failed("read-only session")
    assert ran == []
    assert [text_of(r) for r in seams.post] == ["Error: read-only session"]


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (Ask(), 'tool "echo" requires approval (not yet supported)'),
        (Ask("a human must approve echo"), "a human must approve echo"),
    ],
)
async def test_pre_execute_ask_degrades_to_deny_without_an_approval_service(
    decision: Ask, message: str
) -> None:
    """R6.8: ``ask`` without an approval service is a denial with its reason or the default."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: decision)
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == failed(message)
    assert len(seams.post) == 1


async def test_pre_execute_raising_listener_gives_a_final_error_result() -> None:
    """R9.3: a raising pre-execute listener gives a final error result; post-execute is skipped."""
    hooks, registry = setup()

    def explode(execution: ToolExecution, call_next: Next) -> object:
        raise RuntimeError("policy store offline")

    hooks.on("tools/pre-execute", explode)
    seams = Seams().attach(hooks)
    prepared = await registry.prepare(call())
    assert not prepared.needs_dispatch
    assert not prepared.needs_post_execute
    result = await registry.execute(call())
    assert shape(result) == failed("policy store offline")
    assert seams.post == []
    assert [r for _, r in seams.results] == [result]


async def test_pre_execute_non_decision_gives_a_final_error_result() -> None:
    """R9.3: a pre-execute listener returning something other than a decision fails the call,
    the error naming the listener."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: "yes")
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    listener = f"{__name__}.{test_pre_execute_non_decision_gives_a_final_error_result.__name__}"
    assert shape(result) == failed(
        f"a tools/pre-execute listener ({listener}.<locals>.<lambda>) returned 'yes', "
        "not Allow, Deny or Ask",
        "INVALID_HOOK_RESULT",
        "HookError",
    )
    assert seams.post == []


async def test_pre_execute_listeners_chain_outermost_first() -> None:
    """R6.3: the first listener is outermost and sees the inner listener's decision via next()."""
    hooks, registry = setup()
    outer_saw: list[object] = []

    async def outer(execution: ToolExecution, call_next: Next) -> object:
        decision = await call_next()
        outer_saw.append(decision)
        return decision

    hooks.on("tools/pre-execute", outer)
    hooks.on("tools/pre-execute", lambda *_: Deny("inner says no"))
    result = await registry.execute(call())
    assert outer_saw == [Deny("inner says no")]
    assert text_of(result) == "Error: inner says no"


async def test_pre_execute_short_circuit_allow_runs_the_body() -> None:
    """R6.3: a listener may allow without calling next; later listeners are then not reached."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: Allow())
    hooks.on("tools/pre-execute", lambda *_: Deny("unreachable"))
    result = await registry.execute(call())
    assert shape(result) == {"text": "hi", "is_error": False, "error": None}


async def test_seams_dispatch_with_the_calling_agents_scope() -> None:
    """R6.5: a listener scoped to an agent hears only that agent's calls, on every tool seam."""
    hooks, registry = setup()
    heard: list[tuple[str, str | None]] = []

    async def pre(execution: ToolExecution, call_next: Next) -> object:
        heard.append(("pre", execution.agent_id))
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: Next) -> object:
        heard.append(("execute", execution.agent_id))
        return await call_next()

    async def post(execution: ToolExecution, result: object, call_next: Next) -> object:
        heard.append(("post", execution.agent_id))
        return await call_next()

    hooks.on("tools/pre-execute", pre, agent="a")
    hooks.on("tools/execute", wrap, agent="a")
    hooks.on("tools/post-execute", post, agent="a")
    hooks.on("tools/result", lambda e, _r: heard.append(("result", e.agent_id)), agent="a")
    await registry.execute(call(agent_id="b"))
    await registry.execute(call())
    assert heard == []
    await registry.execute(call(agent_id="a"))
    assert heard == [("pre", "a"), ("execute", "a"), ("post", "a"), ("result", "a")]


# -- stage 3: tools/execute and the body (more in test_tool_pipeline_bodies.py) -----------


async def test_dispatch_bodies_overlap_while_stages_stay_separate(autojump_clock: object) -> None:
    """R9.16: prepare and finish are separate stages; only dispatch runs concurrently."""
    started = {"a": trio.Event(), "b": trio.Event()}

    @tool(parallel_safe=True)
    async def meet(me: str, other: str) -> str:
        """Wait for the other call to start too."""
        started[me].set()
        await started[other].wait()
        return me

    _, registry = setup(meet)
    prepared = [
        await registry.prepare(call("meet", {"me": "a", "other": "b"}, call_id="1")),
        await registry.prepare(call("meet", {"me": "b", "other": "a"}, call_id="2")),
    ]
    results: dict[str, ToolExecutionResult] = {}

    async def run(item: PreparedCall) -> None:
        results[item.execution.call_id] = await registry.dispatch(item)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for item in prepared:
                nursery.start_soon(run, item)
    finals = [await registry.finish(item, results[item.execution.call_id]) for item in prepared]
    assert [text_of(r) for r in finals] == ["a", "b"]


# -- stage 4: tools/post-execute ---------------------------------------------------


async def test_post_execute_accept_replaces_content_keeping_error_flags() -> None:
    """R9.3: ``Accept(content)`` replaces the content but keeps ``is_error`` and ``error``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Accept("tool is not available here"))
    result = await registry.execute(call("missing", {}))
    assert shape(result) == {
        "text": "tool is not available here",
        "is_error": True,
        "error": ToolErrorInfo("ToolError", "UNKNOWN_TOOL"),
    }


async def test_post_execute_accept_without_content_keeps_the_result() -> None:
    """R9.3: the default ``Accept()`` leaves the dispatched result unchanged."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Accept())
    assert shape(await registry.execute(call())) == {"text": "hi", "is_error": False, "error": None}


async def test_post_execute_block_turns_the_result_into_an_error() -> None:
    """R6.9: ``Block(feedback)`` makes the result an error whose content is the feedback."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block(feedback="output redacted"))
    result = await registry.execute(call())
    assert (text_of(result), result.is_error, result.call_id) == ("output redacted", True, "call-1")


async def test_post_execute_block_without_feedback_reports_its_reason() -> None:
    """R6.9: a Block carrying only a reason shows ``Error: <reason>``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block("contains secrets"))
    assert shape(await registry.execute(call())) == failed("contains secrets")


async def test_post_execute_block_with_nothing_to_show_is_refused() -> None:
    """R6.9: a Block needs feedback (or a reason): an empty one is a listener's mistake,
    reported as such rather than shown to the model as a bare ``Error:``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block())
    result = await registry.execute(call())
    assert result.is_error
    assert "Block with neither feedback nor a reason" in text_of(result)


BLANK_FEEDBACK = pytest.mark.parametrize(
    "empty",
    [[], (), "", " \n", [Text("")], (Text(" "), Text("\t"))],
    ids=["list", "tuple", "str", "blank-str", "empty-text", "blank-texts"],
)


@BLANK_FEEDBACK
async def test_post_execute_block_with_empty_feedback_and_no_reason_is_refused(
    empty: object,
) -> None:
    """R6.9: empty feedback, or text of only whitespace, counts as none: with no reason
    either, the Block is refused rather than shown to the model as an empty error."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block(feedback=empty))  # type: ignore[arg-type]
    result = await registry.execute(call())
    assert result.is_error
    assert "Block with neither feedback nor a reason" in text_of(result)


@BLANK_FEEDBACK
async def test_post_execute_block_with_empty_feedback_shows_its_reason(empty: object) -> None:
    """R6.9: empty or blank feedback does not win over a reason: the model sees
    ``Error: <reason>``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block("contains secrets", feedback=empty))  # type: ignore[arg-type]
    assert shape(await registry.execute(call())) == failed("contains secrets")


@pytest.mark.parametrize(
    "decision",
    [
        Accept(additional_context=HookContext("remember: cached")),
        Block("no", additional_context=HookContext("remember: cached")),
    ],
    ids=["accept", "block"],
)
async def test_post_execute_additional_context_rides_on_the_result(decision: object) -> None:
    """R9.4: additional context reaches the loop on the result, never in its content."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: decision)
    result = await registry.execute(call())
    assert result.additional_context == HookContext("remember: cached")
    assert "remember" not in text_of(result)


async def test_post_execute_sees_the_dispatched_result() -> None:
    """R9.3: post-execute listeners get the execution and the dispatched result."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    await registry.execute(call())
    assert [(r.call_id, text_of(r)) for r in seams.post] == [("call-1", "hi")]


@pytest.mark.parametrize(
    ("listener", "expected"),
    [
        (
            lambda *_: (_ for _ in ()).throw(KeyError("audit")),
            failed("KeyError: 'audit'"),
        ),
        (
            lambda *_: Deny("wrong seam"),
            failed(
                f"a tools/post-execute listener ({__name__}.<lambda>) returned "
                "Deny(reason='wrong seam'), not Accept or Block",
                "INVALID_HOOK_RESULT",
                "HookError",
            ),
        ),
    ],
    ids=["raises", "invalid-decision"],
)
async def test_post_execute_failure_becomes_an_error_result(
    listener: Callable[..., object], expected: dict[str, object]
) -> None:
    """R9.3: a raising post-execute listener (or a non-decision) turns the call into an error."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", listener)
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == expected
    assert [r for _, r in seams.results] == [result]


# -- stage 5: validation and tools/result ------------------------------------------


async def test_finish_refuses_a_result_that_is_not_lossless_json() -> None:
    """R9.3: the final result is validated as lossless JSON; a bad one becomes an error."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Accept(unchecked(Text, float("nan"))))  # type: ignore[arg-type]
    result = await registry.execute(call())
    assert shape(result) == failed(
        "content[0].text is a non-finite number (nan)", "INVALID_JSON", "InvalidJsonError"
    )


async def test_result_observers_get_every_final_result() -> None:
    """R9.3: ``tools/result`` observers see the execution and the final result of each call."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    hooks.on("tools/post-execute", lambda *_: Accept("replaced"))
    ok = await registry.execute(call(call_id="1"))
    unknown = await registry.execute(call("nope", {}, call_id="2"))
    assert [(e.call_id, r) for e, r in seams.results] == [("1", ok), ("2", unknown)]
    assert text_of(ok) == "replaced"


async def test_result_observer_failures_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    """R9.3: a raising ``tools/result`` observer is logged and ignored."""
    hooks, registry = setup()
    calls: list[str] = []

    def broken(execution: ToolExecution, result: ToolExecutionResult) -> None:
        calls.append("broken")
        raise RuntimeError("observer bug")

    hooks.on("tools/result", broken)
    hooks.on("tools/result", lambda *_: calls.append("after"))
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        result = await registry.execute(call())
    assert text_of(result) == "hi"
    assert calls == ["broken", "after"]
    logged = [r for r in caplog.records if r.name == "retinue.hooks" and r.exc_info]
    assert [(r.levelno, r.getMessage()) for r in logged] == [
        (
            logging.ERROR,
            f"a tools/result listener ({__name__}.{broken.__qualname__}) failed (contained)",
        )
    ]
    error = logged[0].exc_info[1]  # type: ignore[index]
    assert isinstance(error, RuntimeError)
    assert str(error) == "observer bug"


# -- the whole contract --------------------------------------------------------------


def raising(where: str) -> Callable[..., object]:
    def listener(*_args: object) -> object:
        raise RuntimeError(f"{where} failed")

    return listener


@pytest.mark.parametrize(
    ("seam", "message"),
    [
        ("tools/pre-execute", "tools/pre-execute failed"),
        ("tools/execute", "tools/execute failed"),
        ("tools/post-execute", "tools/post-execute failed"),
        ("tools/result", None),
    ],
)
async def test_execute_never_raises_for_seam_failures(seam: str, message: str | None) -> None:
    """R9.2: whichever seam fails, execute returns a result instead of raising."""
    hooks, registry = setup()
    hooks.on(seam, raising(seam))
    result = await registry.execute(call())
    if message is None:
        assert shape(result) == {"text": "hi", "is_error": False, "error": None}
    else:
        assert shape(result) == failed(message)


async def test_staged_pipeline_equals_execute() -> None:
    """R9.15: prepare, dispatch and finish run the same pipeline as execute."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda _e, r, _next: Accept(f"[{text_of(r)}]"))
    prepared = await registry.prepare(call())
    assert prepared.needs_dispatch
    assert prepared.needs_post_execute
    dispatched = await registry.dispatch(prepared)
    assert text_of(dispatched) == "hi"
    staged = await registry.finish(prepared, dispatched)
    assert staged == await registry.execute(call())
    assert text_of(staged) == "[hi]"


async def test_dispatch_of_a_prepared_result_returns_it_unchanged() -> None:
    """R9.15: a call with a pre-produced result is not dispatched again."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: Deny("no"))
    prepared = await registry.prepare(call())
    assert prepared.result is not None
    assert await registry.dispatch(prepared) is prepared.result


async def test_pipeline_prepare_and_dispatch_are_checkpoints() -> None:
    """R9.1: prepare and dispatch always checkpoint; finish yields only for post-execute listeners.

    Committing results in model order adds no scheduling point when no policy
    listens, which keeps the scheduler's commit cursor cheap.
    """
    hooks, registry = setup()
    with trio.testing.assert_checkpoints():
        prepared = await registry.prepare(call("nope", {}))
    with trio.testing.assert_checkpoints():
        result = await registry.dispatch(prepared)
    with trio.testing.assert_no_checkpoints():
        await registry.finish(prepared, result)
    hooks.on("tools/post-execute", lambda _execution, _result, proceed: proceed())
    with trio.testing.assert_checkpoints():
        await registry.finish(prepared, result)


@tool
async def at_once(text: str) -> str:
    """Answers without awaiting anything."""
    return text.upper()


@pytest.mark.parametrize("arguments", [{"text": "hi"}, {"text": 3}], ids=["answered", "refused"])
async def test_dispatch_checkpoints_when_the_body_gives_no_schedule_point(
    arguments: JsonValue,
) -> None:
    """R9.1: an async body that never awaits, or arguments refused before the body runs,
    still make dispatch a checkpoint, wrapped or not, and its result is the body's."""
    hooks, registry = setup(at_once)
    prepared = await registry.prepare(call("at_once", arguments))
    with trio.testing.assert_checkpoints():
        bare = await registry.dispatch(prepared)
    hooks.on("tools/execute", lambda _execution, proceed: proceed())
    with trio.testing.assert_checkpoints():
        wrapped = await registry.dispatch(prepared)
    assert shape(bare) == shape(wrapped)
    assert (text_of(bare) == "HI") is (arguments == {"text": "hi"})
