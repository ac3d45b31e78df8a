"""Tool bodies as the registry runs them: stray cancels, failures in a tool's own nursery, and
binding arguments to the body's types and a partial's keywords (R9.2, R9.7).
"""

from __future__ import annotations

import contextlib
import email.message
import functools
import urllib.error

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue._errors import ToolError
from retinue._lossless import JsonValue
from retinue.session import ToolErrorInfo
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import Tool, ToolExecutionResult, tool
from tests.helpers import DEADLINE, OPTIONS, raise_stray_cancelled, runtime
from tests.scenarios._tool_bodies_kit import execute, outcome

# -- a stray Cancelled ---------------------------------------------------------------------


async def test_a_stray_cancelled_from_a_body_is_an_error_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2: a Cancelled the body caught from its own scope and re-raised, while nothing around the
    call is cancelled, is the call's error, coded as every stray Cancelled is; it does not end the
    agent's driver.
    """

    @tool
    async def stray() -> str:
        """Misuse a cancel."""
        await raise_stray_cancelled()
        return "unreachable"

    @tool(timeout=30)
    async def stray_timed() -> str:
        """The same, under a timeout that does not fire."""
        await raise_stray_cancelled()
        return "unreachable"

    for body in (stray, stray_timed):
        result: ToolExecutionResult | None = None
        # Escaping this test, the Cancelled would end it as if it had passed.
        with trio.fail_after(60), contextlib.suppress(trio.Cancelled):
            result = await execute(body, {})
        assert result is not None, "the stray Cancelled escaped execute()"
        text, error = outcome(result)
        assert text.startswith(f'Error: tool "{body.name}" raised trio.Cancelled while')
        assert error == ToolErrorInfo("ToolError", "STRAY_CANCELLED")


async def test_a_stray_cancelled_leaves_the_agent_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2: after a tool's stray Cancelled the turn goes on and the agent takes more turns."""

    @retinue.tool
    async def stray() -> str:
        """Misuse a cancel."""
        await raise_stray_cancelled()
        return "unreachable"

    model = ScriptedModel(
        [CallTools([ToolCallSpec("stray", "{}", id="s")]), Reply("ok"), Reply("again")]
    )
    async with runtime(model, tools=[stray]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first = await agent.ask("go")
        second = await agent.ask("again")
    assert (first.reason.kind, second.reason.kind) == ("completed", "completed")


async def test_a_real_cancel_through_a_body_that_reraises_still_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2: a body that catches the enclosing scope's Cancelled and re-raises it is cancelled."""
    with trio.fail_after(DEADLINE):

        @tool
        async def tidy() -> str:
            """Clean up on cancel."""
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                raise

        with trio.move_on_after(5) as scope:
            await execute(tidy, {})
        assert scope.cancelled_caught


# -- failures inside a tool's own nursery ------------------------------------------------


async def test_a_failure_in_a_tools_nursery_is_reported_by_its_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2: the model sees the child's error, not trio's "Exceptions from Trio nursery", and
    a coded ToolError keeps its code through the nursery.
    """

    def fanning_out(error: Exception) -> Tool:
        async def child() -> None:
            await trio.lowlevel.checkpoint()
            raise error

        @tool
        async def fan_out() -> str:
            """Fan out."""
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child)
            return "unreachable"

        return fan_out

    with trio.fail_after(60):
        plain = await execute(fanning_out(ValueError("disk is full")), {})
        coded = await execute(fanning_out(ToolError("quota exceeded", code="QUOTA")), {})
    assert outcome(plain) == ("Error: disk is full", None)
    assert outcome(coded) == ("Error: quota exceeded", ToolErrorInfo("ToolError", "QUOTA"))


class _CodedElsewhereError(Exception):
    """An exception of a library that names its own code, in its own sense."""

    code = "QUOTA"


@pytest.mark.parametrize(
    "error",
    [
        _CodedElsewhereError("quota exceeded"),
        urllib.error.HTTPError(
            "https://example.com", 404, "Not Found", email.message.Message(), None
        ),
        SystemExit("usage: lookup CITY"),
    ],
    ids=["own-class", "http-status", "exit-message"],
)
async def test_a_code_attribute_of_another_exception_codes_no_result(
    autojump_clock: trio.testing.MockClock, error: BaseException
) -> None:
    """R9.2: a result carries a code for a coded harness error alone, a ``ToolError`` the body
    raises among them; the ``code`` of another exception is no retinue code (an HTTP status, a
    process's exit message): the model sees the message as ever, and the result has no code.
    """

    @tool
    async def failing() -> str:
        """Fail."""
        await trio.lowlevel.checkpoint()
        raise error

    with trio.fail_after(DEADLINE):
        text, code = outcome(await execute(failing, {}))
    assert text.startswith("Error: ")
    assert code is None


@pytest.mark.parametrize(
    ("errors", "code"),
    [
        ([ValueError("disk is full"), ToolError("quota exceeded", code="QUOTA")], None),
        (
            [ToolError("disk is full", code="QUOTA"), ToolError("quota exceeded", code="QUOTA")],
            "QUOTA",
        ),
    ],
)
async def test_several_failures_are_joined_with_the_code_they_share(
    autojump_clock: trio.testing.MockClock, errors: list[Exception], code: str | None
) -> None:
    """R9.2: a group of several errors (nested ones too) reads as their messages joined; a
    code is kept only when every error carries it.
    """
    with trio.fail_after(DEADLINE):

        @tool
        async def batch() -> str:
            """Fail twice."""
            await trio.lowlevel.checkpoint()
            raise ExceptionGroup("batch", [errors[0], ExceptionGroup("inner", [errors[1]])])

        expected = None if code is None else ToolErrorInfo("ToolError", code)
        assert outcome(await execute(batch, {})) == (
            "Error: disk is full; quota exceeded",
            expected,
        )


# -- arguments the body's types refuse name their parameter ------------------------------


@attrs.frozen
class Reading:
    value: float


@attrs.frozen
class Window:
    low: int = attrs.field(validator=attrs.validators.ge(0))


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"factor": 10**400}, "factor: int too large to convert to float"),
        (
            {"factor": 1, "readings": [{"value": 1}, {"value": 10**400}]},
            "readings[1].value: int too large to convert to float",
        ),
        ({"factor": 1, "named": {"x": {"value": 10**400}}}, "named.x.value: int too large"),
        ({"factor": 1, "window": {"low": -1}}, "window: 'low' must be >= 0: -1"),
    ],
)
async def test_a_binding_failure_names_the_parameter_path(
    autojump_clock: trio.testing.MockClock, arguments: JsonValue, problem: str
) -> None:
    """R9.3: a valid argument its parameter's type still refuses (a float past range, a
    record's validator) is INVALID_ARGUMENTS naming where, as validation does.
    """
    with trio.fail_after(DEADLINE):

        @tool
        async def scale(
            factor: float,
            readings: list[Reading] | None = None,
            named: dict[str, Reading] | None = None,
            window: Window | None = None,
        ) -> str:
            """Scale."""
            await trio.lowlevel.checkpoint()
            return "scaled"

        text, error = outcome(await execute(scale, arguments))
        assert text.startswith(f'Error: invalid arguments for tool "scale": {problem}')
        assert error == ToolErrorInfo("ToolError", "INVALID_ARGUMENTS")


class _Abort(BaseException):
    """A BaseException of the user's own."""


@attrs.frozen
class Command:
    path: str

    def __attrs_post_init__(self) -> None:
        if self.path == "-":
            raise SystemExit("usage: a path is required")
        if self.path == "!":
            raise _Abort("no such command")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (
            {"command": {"path": "-"}},
            "command: Command raised SystemExit: usage: a path is required",
        ),
        ({"command": {"path": "!"}}, "command: Command raised _Abort: no such command"),
        (
            {"command": {"path": "/bin/true"}, "then": [{"path": "/bin/ls"}, {"path": "-"}]},
            "then[1]: Command raised SystemExit: usage: a path is required",
        ),
    ],
    ids=["exit", "own", "nested"],
)
async def test_a_base_exception_while_binding_refuses_the_arguments(
    autojump_clock: trio.testing.MockClock, arguments: JsonValue, problem: str
) -> None:
    """R9.2, R9.3: a record's constructor run while binding that raises SystemExit, or a
    BaseException of the user's own, is INVALID_ARGUMENTS naming where, as a ValueError is,
    not a raise out of execute that ends the runtime."""

    @tool
    async def run(command: Command, then: list[Command] | None = None) -> str:
        """Run a command."""
        await trio.lowlevel.checkpoint()
        return command.path

    with trio.fail_after(5):
        assert outcome(await execute(run, {"command": {"path": "/bin/true"}})) == (
            "/bin/true",
            None,
        )
        text, error = outcome(await execute(run, arguments))
    assert text == f'Error: invalid arguments for tool "run": {problem}'
    assert error == ToolErrorInfo("ToolError", "INVALID_ARGUMENTS")


# -- partial's bound keywords stay bound ---------------------------------------------------


async def test_a_keyword_bound_by_a_partial_is_neither_shown_nor_overridable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.7: a keyword a ``functools.partial`` binds (a key, say) is not in the schema, so the
    model neither sees its value nor may pass its own; the body gets the bound one.
    """
    with trio.fail_after(DEADLINE):

        async def search(query: str, api_key: str) -> str:
            """Search."""
            await trio.lowlevel.checkpoint()
            return f"{query} with {api_key}"

        bound = tool(name="search")(functools.partial(search, api_key="sk-SECRET"))
        assert "sk-SECRET" not in repr(bound.parameters)
        assert outcome(await execute(bound, {"query": "q"})) == ("q with sk-SECRET", None)
        text, error = outcome(await execute(bound, {"query": "q", "api_key": "forged"}))
        assert text == 'Error: invalid arguments for tool "search": api_key: unexpected property'
        assert error == ToolErrorInfo("ToolError", "INVALID_ARGUMENTS")
