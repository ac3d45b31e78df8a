"""How a tool body runs and fails in dispatch: its exceptions, its thread or task, timeouts,
cancellation, and the tools/execute wrappers and the next() they call (R9.3, R9.7, R6.3).
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing

from retinue._content import Text
from retinue._errors import HookError, ToolError
from retinue._sources import HookContext
from retinue.hooks import Allow
from retinue.tools import Tool, ToolExecution, ToolExecutionResult, tool
from retinue.tools._body import TOOL_THREADS
from tests.helpers import Next
from tests.scenarios._tool_pipeline_kit import Seams, call, failed, setup, shape, text_of

# Sync tool bodies run in worker threads, where the virtual clock would fire tool timeouts
# spuriously, so most tests here run on the real clock: bound each one in real time. The
# slowest takes about 0.2 s; the two with their own 10 s deadlines stay inside this bound.
pytestmark = pytest.mark.timeout(30)


async def test_dispatch_tool_exception_becomes_an_error_result() -> None:
    """R9.2: a raising tool gives ``Error: <message>`` without a code."""

    @tool
    async def fragile() -> str:
        """Fail."""
        raise ValueError("disk is full")

    _, registry = setup(fragile)
    assert shape(await registry.execute(call("fragile", {}))) == failed("disk is full")


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (KeyError("Paris"), "KeyError: 'Paris'"),
        (IndexError("list index out of range"), "IndexError: list index out of range"),
        (RuntimeError(42), "RuntimeError: 42"),
        (ValueError("disk is full"), "disk is full"),
        (ValueError(), "ValueError"),
    ],
)
async def test_dispatch_error_message_names_the_type_when_the_message_is_a_bare_value(
    error: Exception, message: str
) -> None:
    """R9.2: a message that is only a key or a value (``KeyError('Paris')``) is led by the
    exception's type name; a message that stands alone is kept as it is.
    """

    @tool
    async def lookup() -> str:
        """Fail."""
        raise error

    _, registry = setup(lookup)
    assert shape(await registry.execute(call("lookup", {}))) == failed(message)


async def test_dispatch_sync_tool_exiting_becomes_an_error_result() -> None:
    """R9.2: a SystemExit from a tool body (argparse in a sync tool, say) is the call's error
    result; it does not escape ``execute`` and take the runtime down.
    """

    @tool
    def strict(count: int) -> str:
        """Refuse every count."""
        raise SystemExit(f"bad count {count}")

    _, registry = setup(strict)
    assert shape(await registry.execute(call("strict", {"count": 3}))) == failed("bad count 3")


class _Abandoned(BaseException):
    """A user's own BaseException subclass, raised by a body to give up."""


async def _abandon_in_a_nursery() -> str:
    async def give_up() -> None:
        await trio.lowlevel.checkpoint()
        raise _Abandoned("given up in a child")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(give_up)
    return "never"


@pytest.mark.parametrize("kind", ["async", "sync", "nursery"])
async def test_dispatch_tool_raising_its_own_base_exception_becomes_an_error_result(
    kind: str,
) -> None:
    """R9.2, R7.45: a BaseException subclass of the tool's own (not Ctrl-C, not a cancel), bare or
    from the body's nursery, is the call's error result; it does not escape ``execute`` and end the
    runtime with every agent in it."""

    async def async_body() -> str:
        await trio.lowlevel.checkpoint()
        raise _Abandoned("given up")

    def sync_body() -> str:
        raise _Abandoned("given up")

    bodies: dict[str, Callable[[], object]] = {
        "async": async_body,
        "sync": sync_body,
        "nursery": _abandon_in_a_nursery,
    }
    quitter = Tool("quitter", "Give up.", {"type": "object"}, bodies[kind])
    _, registry = setup(quitter)
    result = await registry.execute(call("quitter", {}))
    message = "given up in a child" if kind == "nursery" else "given up"
    assert shape(result) == failed(message)


@pytest.mark.parametrize("nested", [False, True], ids=["bare", "in-a-group"])
async def test_dispatch_lets_ctrl_c_from_a_tool_body_through(*, nested: bool) -> None:
    """Ctrl-C landing in a body, bare or in its nursery's group, is no failure of the
    call: it goes on out of ``execute``, as trio has it."""

    async def interrupted() -> str:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    async def body() -> str:
        if not nested:
            return await interrupted()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupted)
        return "never"

    _, registry = setup(Tool("stopped", "Be stopped.", {"type": "object"}, body))
    with pytest.RaisesGroup(KeyboardInterrupt, flatten_subgroups=True, allow_unwrapped=True):
        await registry.execute(call("stopped", {}))


async def test_dispatch_tool_error_keeps_its_code() -> None:
    """R9.2: a ToolError with a code becomes a coded error named after the exception type."""

    class QuotaError(ToolError):
        code: str | None = "QUOTA"

    @tool
    def limited(which: str) -> str:
        """Fail with a code."""
        if which == "plain":
            raise ToolError("no code here")
        if which == "sub":
            raise QuotaError("quota exhausted")
        raise ToolError("rate limited", code="RATE_LIMITED")

    _, registry = setup(limited)
    coded = await registry.execute(call("limited", {"which": "coded"}))
    assert shape(coded) == failed("rate limited", "RATE_LIMITED")
    sub = await registry.execute(call("limited", {"which": "sub"}))
    assert shape(sub) == failed("quota exhausted", "QUOTA", "QuotaError")
    plain = await registry.execute(call("limited", {"which": "plain"}))
    assert shape(plain) == failed("no code here")


async def test_dispatch_sync_tool_runs_in_a_worker_thread() -> None:
    """R9.7: a sync body runs in a worker thread so it never blocks the trio loop."""
    threads: list[int] = []

    @tool
    def blocking() -> str:
        """Block."""
        threads.append(threading.get_ident())
        return "done"

    _, registry = setup(blocking)
    result = await registry.execute(call("blocking", {}))
    assert text_of(result) == "done"
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


async def test_dispatch_async_tool_runs_in_the_calling_task() -> None:
    """R9.7: an async body is awaited in the trio task that dispatches it."""
    tasks: list[object] = []

    @tool
    async def inline() -> str:
        """Inline."""
        tasks.append(trio.lowlevel.current_task())
        return "done"

    _, registry = setup(inline)
    await registry.execute(call("inline", {}))
    assert tasks == [trio.lowlevel.current_task()]


async def test_dispatch_timeout_is_a_coded_error_on_the_virtual_clock(
    autojump_clock: object,
) -> None:
    """R9.7: a body running past its timeout is cancelled and the call fails with TOOL_TIMEOUT."""

    @tool(timeout=5)
    async def slow(seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "woke"

    _, registry = setup(slow)
    with trio.fail_after(60):
        start = trio.current_time()
        late = await registry.execute(call("slow", {"seconds": 100}))
        assert trio.current_time() - start == pytest.approx(5)
        in_time = await registry.execute(call("slow", {"seconds": 4}))
    assert shape(late) == failed('tool "slow" timed out after 5s', "TOOL_TIMEOUT")
    assert shape(in_time) == {"text": "woke", "is_error": False, "error": None}


class _Seconds(float):
    """A float subclass whose repr names its type, as NumPy's float64 does, and whose
    format adds a unit."""

    def __repr__(self) -> str:
        return f"_Seconds({float(self)!r})"

    def __format__(self, spec: str) -> str:
        return float.__format__(self, spec) + " s"


@pytest.mark.parametrize(
    ("limit", "shown"),
    [
        (1_234_567, "1234567s"),
        (0.5, "0.5s"),
        (2.0, "2s"),
        (1e-7, "1e-07s"),
        (_Seconds(1234567.5), "1234567.5s"),
        (_Seconds(0.5), "0.5s"),
    ],
)
async def test_a_timeout_is_named_as_it_was_given(
    autojump_clock: object, limit: float, shown: str
) -> None:
    """R9.7: the TOOL_TIMEOUT error names the limit the tool was given, not a rounding of it
    (six digits made 1234567 s read 1.23457e+06 s)."""

    @tool(timeout=limit)
    async def hang() -> str:
        """Sleep for ever."""
        await trio.sleep_forever()
        return "never"

    _, registry = setup(hang)
    with trio.fail_after(2_000_000):
        result = await registry.execute(call("hang", {}))
    assert shape(result) == failed(f'tool "hang" timed out after {shown}', "TOOL_TIMEOUT")


async def test_dispatch_timeout_abandons_a_blocked_sync_tool(autojump_clock: object) -> None:
    """R9.7: a sync body past its timeout is abandoned in its thread; the call fails at once,
    saying the body timed out (it ran: no wait for a thread), and the abandoned thread holds
    no slot of trio's default thread pool.
    """
    release = threading.Event()

    @tool(timeout=2)
    def stuck() -> str:
        """Block on a thread event."""
        release.wait(10)
        return "late"

    _, registry = setup(stuck)
    try:
        with trio.fail_after(60):
            result = await registry.execute(call("stuck", {}))
        # Its thread runs on apart from trio's default pool, which the stores' threads use.
        assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
    finally:
        release.set()
    assert shape(result) == failed('tool "stuck" timed out after 2s', "TOOL_TIMEOUT")


# The two tests below wait on real threads, so they run on the real clock: a virtual one
# would jump past every deadline while the threads work.


async def test_dispatch_timed_out_sync_bodies_give_back_their_thread_slots() -> None:
    """R9.7: a sync body abandoned at its timeout gives its worker-thread slot back though its
    thread runs on; as many hung bodies as there are slots starve no later sync tool.
    """
    release = threading.Event()

    @tool(timeout=0.05)
    def fetch() -> str:
        """Block like a request without a timeout."""
        release.wait(30)
        return "late"

    @tool(timeout=5)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    _, registry = setup(fetch, add)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for index in range(TOOL_THREADS):
                    nursery.start_soon(registry.execute, call("fetch", {}, call_id=f"f{index}"))
            timed = await registry.execute(call("add", {"a": 1, "b": 2}))
            untimed = await registry.execute(call("echo", {"text": "hi"}))
    finally:
        release.set()
    assert shape(timed) == {"text": "3", "is_error": False, "error": None}
    assert text_of(untimed) == "hi"


async def test_dispatch_waiting_past_the_timeout_for_a_thread_slot_says_so() -> None:
    """R9.7: when every worker-thread slot is held by a running body, a call whose timeout
    passes before it gets one fails saying no thread was free: its body never ran.
    """
    release = threading.Event()

    @tool
    def busy() -> str:
        """Block until released."""
        release.wait(30)
        return "done"

    @tool(timeout=0.2)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    _, registry = setup(busy, add)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for index in range(TOOL_THREADS):
                nursery.start_soon(registry.execute, call("busy", {}, call_id=f"b{index}"))
            await trio.testing.wait_all_tasks_blocked()
            try:
                starved = await registry.execute(call("add", {"a": 1, "b": 2}))
            finally:
                release.set()
    assert shape(starved) == failed(
        'tool "add" did not run: no worker thread free within 0.2s', "TOOL_TIMEOUT"
    )


async def test_dispatch_outer_cancellation_propagates(autojump_clock: object) -> None:
    """R9.2: only cancellation escapes; it is never turned into a result or swallowed."""

    @tool
    async def forever() -> str:
        """Never return."""
        await trio.sleep_forever()

    hooks, registry = setup(forever)
    seams = Seams().attach(hooks)
    with trio.move_on_after(3) as scope:
        await registry.execute(call("forever", {}))
    assert scope.cancelled_caught
    assert seams.results == []
    assert seams.post == []


async def test_execute_wrapper_wraps_the_body() -> None:
    """R9.3: a ``tools/execute`` wrapper sees the body's result and may replace it."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)

    async def annotate(execution: ToolExecution, call_next: Next) -> object:
        result = await call_next()
        assert isinstance(result, ToolExecutionResult)
        return attrs.evolve(result, content=(*result.content, Text(" (checked)")))

    hooks.on("tools/execute", annotate)
    result = await registry.execute(call())
    assert text_of(result) == "hi (checked)"
    assert [text_of(r) for r in seams.post] == ["hi (checked)"]


@pytest.mark.parametrize(
    ("wrapper", "expected"),
    [
        (
            lambda *_: (_ for _ in ()).throw(RuntimeError("sandbox crashed")),
            failed("sandbox crashed"),
        ),
        (
            lambda *_: ToolExecutionResult("other-call", "forged"),
            failed(
                f"a tools/execute listener ({__name__}.<lambda>) returned "
                'a result for call "other-call", expected "call-1"',
                "INVALID_HOOK_RESULT",
                "HookError",
            ),
        ),
        (
            lambda *_: "not a result",
            failed(
                f"a tools/execute listener ({__name__}.<lambda>) returned 'not a result', "
                'not a ToolExecutionResult for call "call-1"',
                "INVALID_HOOK_RESULT",
                "HookError",
            ),
        ),
    ],
    ids=["raises", "other-call-id", "non-result"],
)
async def test_execute_wrapper_failure_gives_a_final_error_result(
    wrapper: Callable[[ToolExecution, Next], object], expected: dict[str, object]
) -> None:
    """R9.3: a raising wrapper or one returning another call's result fails finally (no post); the
    error names the wrapper that returned it, as every seam's does, not the seam alone."""
    hooks, registry = setup()
    hooks.on("tools/execute", wrapper)
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == expected
    assert result.call_id == "call-1"
    assert seams.post == []
    assert [r for _, r in seams.results] == [result]


def _marking_tool() -> tuple[Tool, list[str]]:
    """A ``mark(text)`` tool and the list of texts its body ran with."""
    ran: list[str] = []

    @tool
    def mark(text: str) -> str:
        """Mark."""
        ran.append(text)
        return text

    return mark, ran


@pytest.mark.parametrize(
    "decision",
    [Allow(content="rewritten"), Allow(additional_context=HookContext("note"))],
    ids=["content", "context"],
)
async def test_pre_execute_allow_carrying_what_it_cannot_apply_is_refused(
    decision: Allow,
) -> None:
    """R6.8: pre-execute offers a bare allow; content or context on it would be dropped
    silently, so the call fails with an error that says so and the body never runs."""
    mark, ran = _marking_tool()
    hooks, registry = setup(mark)
    hooks.on("tools/pre-execute", lambda *_: decision)
    result = await registry.execute(call("mark"))
    assert result.is_error
    assert "cannot be rewritten before it runs" in text_of(result)
    assert ran == []


async def test_a_wrapper_calling_next_twice_does_not_run_the_body_twice() -> None:
    """R6.3: ``next`` runs the rest of the chain once; a second call is an error."""
    mark, ran = _marking_tool()

    async def twice(_execution: ToolExecution, call_next: Next) -> object:
        await call_next()
        return await call_next()

    hooks, registry = setup(mark)
    hooks.on("tools/execute", twice)
    result = await registry.execute(call("mark"))
    assert ran == ["hi"]
    assert result.is_error
    assert f"({__name__}.{twice.__qualname__}) called next() more than once" in text_of(result)


async def test_a_wrapper_keeping_next_cannot_run_the_body_after_its_call() -> None:
    """R6.3: ``next`` runs the rest of the chain only while the listener's call lasts;
    a kept ``next`` is refused, a ``next()`` made in time but left unawaited fails the
    call and is closed, and the tool body never runs outside its call."""
    mark, ran = _marking_tool()
    kept: list[Next] = []
    made: list[typing.Any] = []

    def short_circuit(execution: ToolExecution, call_next: Next) -> ToolExecutionResult:
        kept.append(call_next)
        return ToolExecutionResult(execution.call_id, "skipped")

    hooks, registry = setup(mark)
    hooks.on("tools/execute", short_circuit)
    result = await registry.execute(call("mark"))
    assert (text_of(result), result.is_error) == ("skipped", False)
    with pytest.raises(
        HookError,
        match=rf"tools/execute listener \({__name__}\.{short_circuit.__qualname__}\) called next\(\) after",
    ):
        await kept[0]()
    assert ran == []

    def make_then_return(execution: ToolExecution, call_next: Next) -> ToolExecutionResult:
        made.append(call_next())
        return ToolExecutionResult(execution.call_id, "skipped")

    hooks, registry = setup(mark)
    hooks.on("tools/execute", make_then_return)
    result = await registry.execute(call("mark"))
    assert result.is_error
    assert (
        f"({__name__}.{make_then_return.__qualname__}) called next() but never awaited"
        in text_of(result)
    )
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        await made[0]
    assert ran == []
