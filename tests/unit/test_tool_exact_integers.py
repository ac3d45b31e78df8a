"""An integer argument reaches the body as the integer the model wrote, or is refused (R9.3, R9.6).

A JSON number written with a fraction or an exponent (``1e25``, ``3.0``) is parsed
into a float. Below 2**53 in magnitude that float is exactly the integer written;
past it the float no longer says which integer was written (``1e25`` reads as
10000000000000000905969664), so an ``integer`` argument written that way is refused
with ``INVALID_ARGUMENTS`` naming its path, rather than handed to the body as another
number.
"""

from __future__ import annotations

from typing import TypedDict

import pytest
import trio
import trio.testing

from retinue._content import content_text
from retinue.hooks import HookBus
from retinue.loop import parse_arguments
from retinue.session import ToolErrorInfo
from retinue.tools import Tool, ToolExecution, ToolRegistry, tool
from tests.helpers import DEADLINE

INEXACT = "not exactly representable as an integer"
SAFE = 2**53 - 1


async def call(target: Tool, text: str) -> tuple[str, ToolErrorInfo | None]:
    """Run *target* on arguments the model wrote as *text*, parsed as the loop parses them."""
    registry = ToolRegistry(HookBus(), [target])
    execution = ToolExecution("c1", target.name, parse_arguments(text), raw_arguments=text)
    with trio.fail_after(DEADLINE):
        result = await registry.execute(execution)
    return content_text(result.content), result.error


received: list[object] = []


@pytest.fixture(autouse=True)
def _fresh_record() -> None:
    received.clear()


@tool
async def count(n: int) -> str:
    """Count to *n*."""
    await trio.lowlevel.checkpoint()
    received.append(n)
    return repr(n)


@pytest.mark.parametrize(
    "written",
    [
        "1e25",
        "1.0e20",
        "123456789012345678901.0",
        "9007199254740993.0",
        "9007199254740992.0",
        "-1E25",
    ],
)
async def test_an_int_written_as_a_float_past_2_to_the_53_is_refused(
    autojump_clock: trio.testing.MockClock, written: str
) -> None:
    """R9.3: the body never gets an int other than the one written (int(1e25) is not 10**25):
    the call fails with INVALID_ARGUMENTS naming the argument and why, and the body does not run.
    """
    text, error = await call(count, f'{{"n": {written}}}')
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert f'invalid arguments for tool "count": n: {INEXACT}' in text
    assert "2**53" in text
    assert received == []


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("3.0", 3),
        ("-4.0", -4),
        ("3e2", 300),
        (f"{SAFE}.0", SAFE),
        (f"-{SAFE}.0", -SAFE),
        ("10000000000000000000000000", 10**25),
    ],
)
async def test_an_int_that_is_exact_reaches_the_body_as_that_int(
    autojump_clock: trio.testing.MockClock, written: str, expected: int
) -> None:
    """R9.3: an integral float below 2**53 is the integer written, and integer digits are exact
    at any size: the body gets that int.
    """
    text, error = await call(count, f'{{"n": {written}}}')
    assert error is None, text
    assert received == [expected]
    assert type(received[0]) is int


class Order(TypedDict):
    quantity: int


@tool
async def place(orders: list[Order], sizes: dict[str, int] | None = None) -> str:
    """Place orders."""
    await trio.lowlevel.checkpoint()
    received.append((orders, sizes))
    return "placed"


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ('{"orders": [{"quantity": 1}, {"quantity": 1e25}]}', "orders[1].quantity"),
        ('{"orders": [], "sizes": {"big": 2e60}}', "sizes.big"),
    ],
)
async def test_a_nested_inexact_int_is_refused_at_its_path(
    autojump_clock: trio.testing.MockClock, arguments: str, path: str
) -> None:
    """R9.3: inside lists, records and maps the refusal names the argument's full path."""
    text, error = await call(place, arguments)
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert f"{path}: {INEXACT}" in text
    assert received == []


@tool
async def either(value: int | str) -> str:
    """Take an int or a string."""
    await trio.lowlevel.checkpoint()
    received.append(value)
    return repr(value)


@tool
async def measure(value: int | float) -> str:  # noqa: PYI041 - the int branch is under test
    """Take a number."""
    await trio.lowlevel.checkpoint()
    received.append(value)
    return repr(value)


async def test_a_union_with_int_explains_the_refusal_or_takes_the_float(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3: ``int | str`` refuses 1e25 saying why; ``int | float`` gives the body the float
    1e25 it can hold, never a different int.
    """
    text, error = await call(either, '{"value": 1e25}')
    assert error is not None
    assert f"value: {INEXACT}" in text

    text, error = await call(measure, '{"value": 1e25}')
    assert error is None, text
    assert received == [1e25]
    assert type(received[0]) is float


def _hand_written(schema: dict[str, object]) -> Tool:
    async def body(value: object = None) -> str:
        await trio.lowlevel.checkpoint()
        received.append(value)
        return repr(value)

    parameters = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    return Tool("hand", "A hand-written schema.", parameters, body)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer"},
        {"type": ["integer", "null"]},
        {"type": "integer", "minimum": 0},
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
    ],
)
async def test_a_hand_written_integer_refuses_an_inexact_float(
    autojump_clock: trio.testing.MockClock, schema: dict[str, object]
) -> None:
    """R9.7: a hand-written ``"type": "integer"`` (JSON Schema counts 1.0 an integer) is held to
    the same bound, on the validator's fast path and in its full check alike.
    """
    text, error = await call(_hand_written(schema), '{"value": 1e25}')
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert f"value: {INEXACT}" in text
    assert received == []


@pytest.mark.parametrize(
    ("schema", "written", "expected"),
    [
        ({"type": "integer"}, "3.0", 3.0),
        ({"type": "integer"}, f"{SAFE}.0", float(SAFE)),
        ({"type": "number"}, "1e25", 1e25),
        ({"type": ["integer", "number"]}, "1e25", 1e25),
    ],
)
async def test_a_hand_written_schema_still_takes_exact_integers_and_numbers(
    autojump_clock: trio.testing.MockClock,
    schema: dict[str, object],
    written: str,
    expected: float,
) -> None:
    """R9.7: below 2**53 an integral float is still an integer, and a ``number`` takes any."""
    text, error = await call(_hand_written(schema), f'{{"value": {written}}}')
    assert error is None, text
    assert received == [expected]


@pytest.mark.parametrize(
    "schema",
    [
        {"enum": [2**60, 0.5]},
        {"const": 2**60},
        {"anyOf": [{"const": 2**60}, {"type": "string"}]},
    ],
    ids=["enum", "const", "anyOf const"],
)
async def test_an_inexact_float_matches_no_int_choice(
    autojump_clock: trio.testing.MockClock, schema: dict[str, object]
) -> None:
    """R9.3: 1.152921504606847e18 is the float nearest 2**60 but says nothing of which integer
    its text wrote (1152921504606847000, say): it does not match the int choice 2**60, as
    an exact 2**60 and a float choice matched by that float do."""
    target = _hand_written(schema)
    _, error = await call(target, '{"value": 1.152921504606847e18}')
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    text, error = await call(target, f'{{"value": {2**60}}}')
    assert error is None, text
    floats = _hand_written({"enum": [1.152921504606847e18]})
    text, error = await call(floats, '{"value": 1.152921504606847e18}')
    assert error is None, text
    assert received == [2**60, 1.152921504606847e18]
