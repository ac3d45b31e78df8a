"""``TurnResult.raise_for_error()``: raise a failed turn's error, else return the result.

As ``httpx.Response.raise_for_status()`` does for a response.
"""

from __future__ import annotations

import traceback

import attrs
import pytest
import trio
import trio.testing

from retinue import AgentError, ModelError, TurnResult
from retinue.session import TurnEndReason
from retinue.testing import FinishWithError, RaiseMidStream, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


class QuotaError(ModelError):
    """A model's own failure, with a field of its own."""

    retry_after = 30.0


async def test_a_completed_turn_returns_itself(autojump_clock: trio.testing.MockClock) -> None:
    """R4.12: a turn that completed raises nothing; the call returns the result."""
    async with runtime(ScriptedModel([Reply("fine")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.raise_for_error() is result
        assert result.raise_for_error().text == "fine"


async def test_a_failed_turn_raises_its_own_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.12, R7.45: a turn the model's exception ended raises that exception, its fields
    kept; one a model's ``finish{error}`` ended raises the ``ModelError`` named so."""
    failure = QuotaError("slow down", code="RATE_LIMITED")
    model = ScriptedModel([RaiseMidStream(failure), FinishWithError("refused", "CONTENT_FILTER")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first = await agent.ask("one")
        with pytest.raises(QuotaError) as raised:
            first.raise_for_error()
        assert raised.value.retry_after == 30.0
        assert (raised.value.message, raised.value.code) == ("slow down", "RATE_LIMITED")
        assert raised.value is not first.error
        assert raised.value.__cause__ is first.error
        second = await agent.ask("two")
        with pytest.raises(ModelError, match="refused") as finish:
            second.raise_for_error()
        assert finish.value.code == "CONTENT_FILTER"


@pytest.mark.parametrize(
    "reason",
    [
        TurnEndReason.aborted("stop"),
        TurnEndReason.disposed(),
        TurnEndReason.max_tokens(),
        TurnEndReason.rejected("blocked"),
    ],
)
def test_ends_that_are_no_failure_raise_nothing(reason: TurnEndReason) -> None:
    """R4.12: ``aborted``, ``disposed``, ``max-tokens`` and ``rejected`` are ends, not
    failures: the reason tells them apart."""
    result = TurnResult(1, reason)
    assert result.raise_for_error() is result


def test_an_error_read_from_the_log_raises_an_agent_error_with_its_code() -> None:
    """R4.12: an ``error`` end without its exception (an answer read from the log) raises
    ``AgentError`` with the logged message and code."""
    result = TurnResult(3, TurnEndReason.error(2, "the driver crashed", "DRIVER_CRASH"))
    with pytest.raises(AgentError, match="the driver crashed") as raised:
        result.raise_for_error()
    assert raised.value.code == "DRIVER_CRASH"


def test_a_base_exception_is_not_raised_at_the_caller() -> None:
    """R7.44: a turn a ``SystemExit`` of a tool ended raises ``AgentError`` chained to it,
    not the ``SystemExit``, which would end the caller's program."""
    exit_ = SystemExit(3)
    result = TurnResult(
        1, TurnEndReason.error(1, "a tool raised SystemExit: 3", "UNKNOWN"), error=exit_
    )
    with pytest.raises(AgentError) as raised:
        result.raise_for_error()
    assert raised.value.__cause__ is exit_


def test_each_call_raises_an_error_of_its_own() -> None:
    """R4.12: a result two asks share is raised from more than one place: each call raises
    a copy of its own, so no traceback grows from call to call and the stored error, with
    the turn's traceback, is left as it was."""
    try:
        raise ModelError("the stream broke", code="STREAM_ERROR")
    except ModelError as error:
        stored = error
    result = TurnResult(1, TurnEndReason.error(1, "the stream broke", "STREAM_ERROR"), error=stored)
    depth = len(traceback.extract_tb(stored.__traceback__))
    raised: list[ModelError] = []
    for _ in range(3):
        with pytest.raises(ModelError) as caught:
            result.raise_for_error()
        raised.append(caught.value)
    assert len({len(traceback.extract_tb(error.__traceback__)) for error in raised}) == 1
    assert len({id(error) for error in raised}) == 3
    assert all(error.__cause__ is stored and error.code == "STREAM_ERROR" for error in raised)
    assert len(traceback.extract_tb(stored.__traceback__)) == depth


@attrs.define
class SlottedError(Exception):
    """An attrs exception: slots, and a weak-reference slot no copy can write."""

    detail: str


@attrs.frozen
class FrozenError(Exception):
    """An exception no copy can be made of: its fields cannot be set."""

    detail: str


@pytest.mark.parametrize("kind", [SlottedError, FrozenError])
def test_an_attrs_error_keeps_its_type(kind: type[SlottedError | FrozenError]) -> None:
    """R4.12: an attrs exception is raised as its own type, with its fields: copied when
    it can be, else the stored error itself (an ``except`` for its type still catches it)."""
    try:
        raise kind("why")
    except kind as error:
        stored = error
    result = TurnResult(1, TurnEndReason.error(1, "why", None), error=stored)
    with pytest.raises(kind) as caught:
        result.raise_for_error()
    raised = caught.value
    assert isinstance(raised, SlottedError | FrozenError)
    assert raised.detail == "why"


def raised_copy(stored: Exception) -> BaseException:
    """What ``raise_for_error`` raises for a turn *stored* ended: a copy, equal in type and text."""
    result = TurnResult(1, TurnEndReason.error(1, str(stored), None), error=stored)
    with pytest.raises(type(stored)) as caught:
        result.raise_for_error()
    assert caught.value is not stored
    assert str(caught.value) == str(stored)
    return caught.value


class MissingFileError(OSError):
    """An ``OSError`` whose ``__init__`` takes other args than ``OSError``'s."""

    def __init__(self, path: str) -> None:
        super().__init__(2, "no such file", path)


class MissingModuleError(ImportError):
    """An ``ImportError`` naming its module by keyword, outside its args."""

    def __init__(self, module: str) -> None:
        super().__init__(f"no module {module}", name=module, path="/x")


def test_a_built_in_error_s_fields_outside_its_args_are_kept() -> None:
    """R4.12: a copy keeps what a built-in base holds beside its args (an ``OSError``'s
    file name, an ``ImportError``'s module name and path), even when the subclass's own
    ``__init__`` put them there."""
    for stored in (MissingFileError("/etc/x"), MissingModuleError("yaml")):
        copy = raised_copy(stored)
        if isinstance(stored, OSError):
            assert isinstance(copy, OSError)
            assert (copy.errno, copy.filename) == (2, "/etc/x")
        else:
            assert isinstance(copy, ImportError)
            assert (copy.name, copy.path) == ("yaml", "/x")


class Failures(ExceptionGroup[Exception]):
    """An exception group whose ``__init__`` takes a list, kept as a tuple."""

    def __init__(self, message: str, errors: list[Exception]) -> None:
        super().__init__(message, errors)


def test_an_exception_group_and_an_attribute_error_are_copied_whole() -> None:
    """R4.12: an exception group built from a list is copied (its read-only ``exceptions``
    already the args' own), and an ``AttributeError``'s ``name`` and ``obj``, which its
    args do not hold, are kept: each call raises a copy, not the stored error."""
    with pytest.raises(AttributeError) as raised:
        [].nope  # type: ignore[attr-defined]  # noqa: B018
    for stored in (Failures("two failed", [ValueError("a"), KeyError("b")]), raised.value):
        copy = raised_copy(stored)
        if isinstance(stored, ExceptionGroup):
            assert isinstance(copy, ExceptionGroup)
            assert copy.exceptions == stored.exceptions
        else:
            assert isinstance(copy, AttributeError)
            assert (copy.name, copy.obj) == ("nope", [])
