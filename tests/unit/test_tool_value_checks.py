"""``Annotated`` rules no schema keyword can say: enforced on every call or refused when the
tool is decorated, never ignored (R9.3 stage 3, R9.7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NewType

import annotated_types
import pydantic
import pydantic.json_schema
import pytest
from pydantic import Field
from typing_extensions import TypeAliasType

from retinue import Text
from retinue._lossless import freeze_json
from retinue.hooks import HookBus
from retinue.tools import Tool, ToolExecution, ToolExecutionResult, ToolRegistry, tool
from tests.unit._tool_kit import properties


def _is_even(value: int) -> bool:
    return value % 2 == 0


def _is_large(value: int) -> bool:
    return value > 100


_SEEN: list[object] = []


def _is_two(value: object) -> bool:
    _SEEN.append(value)
    return value == 2


async def _call(target: Tool, arguments: dict[str, object]) -> ToolExecutionResult:
    registry = ToolRegistry(HookBus(), [target])
    return await registry.execute(ToolExecution("c1", target.name, freeze_json(arguments)))


def _refusal(result: ToolExecutionResult) -> str:
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "INVALID_ARGUMENTS"
    (text,) = result.content
    assert isinstance(text, Text)
    return text.text


async def test_predicate_and_not_are_checked_on_every_call_before_the_body() -> None:
    """R9.3: annotated-types' ``Predicate`` and ``Not`` refuse a value the schema lets by,
    naming the argument (an item's index too) and the function; the body never runs."""
    ran: list[object] = []

    @tool
    def label(
        count: Annotated[int, annotated_types.Gt(0), annotated_types.Predicate(_is_even)],
        names: list[annotated_types.LowerCase[str]],
        code: Annotated[str, annotated_types.Not(str.isdigit)] = "x",
    ) -> str:
        """Label."""
        ran.append((count, names, code))
        return "ok"

    odd = await _call(label, {"count": 3, "names": ["a"]})
    assert "count: must satisfy _is_even, got 3" in _refusal(odd)
    upper = await _call(label, {"count": 2, "names": ["a", "B"]})
    assert "names[1]: must satisfy str.islower, got 'B'" in _refusal(upper)
    digits = await _call(label, {"count": 2, "names": [], "code": "42"})
    assert "code: must not satisfy str.isdigit, got '42'" in _refusal(digits)
    assert ran == []
    good = await _call(label, {"count": 4, "names": ["a", "b"], "code": "a1"})
    assert not good.is_error
    assert ran == [(4, ["a", "b"], "a1")]


async def test_each_argument_a_check_refuses_is_named_as_the_schema_check_names_them() -> None:
    """R9.3: the checks that run as the arguments are converted (a ``Predicate``, a record's
    own validation, a set's items equal once converted) name each argument they refuse, up
    to five and then that there are more, as the schema's check does, so a model fixes them
    in one call; the body never runs."""
    ran: list[object] = []

    @tool
    def tally(
        a: Annotated[int, annotated_types.Predicate(_is_even)] = 0,
        b: list[annotated_types.LowerCase[str]] = [],  # noqa: B006 - read, never changed
        c: Annotated[int, annotated_types.Predicate(_is_large)] = 200,
        d: set[int | bool] = set(),  # noqa: B006 - read, never changed
        e: Annotated[int, annotated_types.Predicate(_is_even)] = 0,
        f: Annotated[int, annotated_types.Predicate(_is_even)] = 0,
        g: Annotated[int, annotated_types.Predicate(_is_even)] = 0,
    ) -> str:
        """Tally."""
        ran.append(a)
        return "ok"

    two = await _call(tally, {"a": 3, "b": ["x"], "c": 5})
    assert _refusal(two) == (
        'Error: invalid arguments for tool "tally": a: must satisfy _is_even, got 3; '
        "c: must satisfy _is_large, got 5"
    )
    every = {"a": 1, "b": ["X"], "c": 1, "d": [1, True], "e": 1, "f": 1, "g": 1}
    refusal = _refusal(await _call(tally, every))
    assert refusal.startswith(
        'Error: invalid arguments for tool "tally": a: must satisfy _is_even, got 1; '
        "b[0]: must satisfy str.islower, got 'X'; c: must satisfy _is_large, got 1; d: "
    )
    assert refusal.endswith("; e: must satisfy _is_even, got 1; and more")
    assert ran == []


async def test_an_annotated_shorthand_given_as_metadata_is_checked_as_its_rules() -> None:
    """R9.7: annotated-types' ``LowerCase`` written as metadata, ``Annotated[str, LowerCase]``
    where ``LowerCase[str]`` was meant, is an ``Annotated`` alias holding a ``Predicate``:
    its rules are checked as if written there, never passed over unenforced."""

    @tool
    def label(
        name: Annotated[str, annotated_types.LowerCase],
        short: Annotated[str, Annotated[str, annotated_types.MaxLen(3)]] = "a",
    ) -> str:
        """Label."""
        return f"{name} {short}"

    upper = await _call(label, {"name": "B"})
    assert "name: must satisfy str.islower, got 'B'" in _refusal(upper)
    assert "short: " in _refusal(await _call(label, {"name": "b", "short": "long"}))
    assert properties(label)["short"]["maxLength"] == 3
    assert (await _call(label, {"name": "b", "short": "abc"})).content == (Text("b abc"),)


_Lower = TypeAliasType("_Lower", Annotated[str, annotated_types.Predicate(str.islower)])
_Short = TypeAliasType("_Short", Annotated[str, annotated_types.MaxLen(3)])


async def test_a_type_alias_of_annotated_given_as_metadata_is_checked_as_its_rules() -> None:
    """R9.7: a ``TypeAliasType`` whose value is an ``Annotated`` alias, given as metadata, is
    read as the rules it holds, as the alias itself is: neither dropped nor left unchecked."""

    @tool
    def label(name: Annotated[str, _Lower], short: Annotated[str, _Short] = "a") -> str:
        """Label."""
        return f"{name} {short}"

    assert "name: must satisfy str.islower, got 'B'" in _refusal(await _call(label, {"name": "B"}))
    assert "short: " in _refusal(await _call(label, {"name": "b", "short": "long"}))
    assert properties(label)["short"]["maxLength"] == 3


def _lower_of_int(x: Annotated[int, annotated_types.LowerCase]) -> int:
    return x


def _short_of_int(x: Annotated[int, Annotated[str, annotated_types.MaxLen(3)]]) -> int:
    return x


def _whole_of_int(
    x: Annotated[int, Annotated[float, annotated_types.Predicate(float.is_integer)]],
) -> int:
    return x


@pytest.mark.parametrize(
    ("function", "named"),
    [(_lower_of_int, "str"), (_short_of_int, "str"), (_whole_of_int, "float")],
)
def test_an_annotated_alias_of_another_type_is_refused_when_decorated(
    function: Callable[..., object], named: str
) -> None:
    """R9.7: an ``Annotated`` alias given as metadata of a value of another type than its
    own would fail every call on its rules: it is refused naming both types. A ``Predicate``
    of one number type is of another's too (``float.is_integer`` fails on an int), where a
    bound takes either."""
    with pytest.raises(TypeError, match=rf"\(x\): .*rules of {named}, not of int"):
        tool(function)


async def test_an_annotated_alias_of_an_overlapping_type_is_taken_and_enforced() -> None:
    """R9.7: only an alias of a type no value of the hint can be is refused: one of ``int``
    bounds a ``float`` (an int stands for a float), and one of ``str`` checks what of ``Any``
    is a str, each enforced as before."""

    @tool
    def scale(
        factor: Annotated[float, Annotated[int, annotated_types.Gt(0)]],
        tag: Annotated[Any, annotated_types.LowerCase] = "a",
    ) -> str:
        """Scale."""
        return f"{factor} {tag}"

    assert (await _call(scale, {"factor": 2.5})).content == (Text("2.5 a"),)
    assert "factor: must be > 0" in _refusal(await _call(scale, {"factor": -1.0}))
    assert "tag: must satisfy str.islower" in _refusal(
        await _call(scale, {"factor": 1, "tag": "B"})
    )


def test_a_default_a_check_refuses_is_not_shown() -> None:
    """R9.7: a default the hint's ``Predicate`` refuses is not shown: the model sending it
    would be refused as invalid. One it takes is shown."""

    def label(
        upper: Annotated[str, annotated_types.LowerCase] = "ABC",
        lower: Annotated[str, annotated_types.LowerCase] = "abc",
    ) -> str:
        return upper + lower

    shown = properties(tool(label))
    assert (shown["upper"], shown["lower"]) == (
        {"type": "string"},
        {"type": "string", "default": "abc"},
    )


async def test_a_predicate_sees_the_value_the_body_gets() -> None:
    """R9.7: the check runs on the converted value: JSON's ``2.0`` for an ``int`` is ``2``."""
    _SEEN.clear()

    @tool
    def take(n: Annotated[int, annotated_types.Predicate(_is_two)]) -> str:
        """Take."""
        return repr(n)

    result = await _call(take, {"n": 2.0})
    assert result.content == (Text("2"),)
    assert "n: must satisfy" in _refusal(await _call(take, {"n": 3}))
    assert _SEEN[0] == 2
    assert type(_SEEN[0]) is int


async def test_a_union_member_whose_check_fails_gives_way_to_the_next() -> None:
    """R9.7: of a union's members the first that takes the value, its checks included."""

    @tool
    def pick(
        n: Annotated[int, annotated_types.Predicate(_is_even)]
        | Annotated[int, annotated_types.Predicate(_is_large)],
    ) -> str:
        """Pick."""
        return str(n)

    assert not (await _call(pick, {"n": 4})).is_error
    assert not (await _call(pick, {"n": 101})).is_error
    assert "n: must satisfy _is_even, got 3" in _refusal(await _call(pick, {"n": 3}))


@pytest.mark.parametrize(
    ("marker", "named"),
    [
        (annotated_types.Timezone(None), r"Timezone\(tz=None\)"),
        (pydantic.AfterValidator(str.strip), "AfterValidator"),
        (pydantic.BeforeValidator(str.strip), "BeforeValidator"),
        (pydantic.WithJsonSchema({"type": "string"}), "WithJsonSchema"),
        (Field(validate_default=True), r"Field\(validate_default=True\)"),
        (
            pydantic.StringConstraints(strip_whitespace=True),
            r"StringConstraints\(strip_whitespace=True\)",
        ),
        (pydantic.StringConstraints(ascii_only=True), r"StringConstraints\(ascii_only=True\)"),
        (Field(coerce_numbers_to_str=True), r"Field\(coerce_numbers_to_str=True\)"),
        (Field(alias="text"), r"Field\(alias='text'\)"),
    ],
)
def test_a_rule_no_check_enforces_is_refused_when_decorated(marker: object, named: str) -> None:
    """R9.7: an annotated-types or pydantic item asking what no check does (a conversion, a
    validator, another argument name) is refused naming the parameter and the item."""

    def echo(value: str) -> str:
        """Echo."""
        return value

    echo.__annotations__["value"] = Annotated[str, marker]
    with pytest.raises(TypeError, match=rf"echo\(value\): .*{named}.* is not enforced"):
        tool(echo)


@pytest.mark.parametrize("default", [Field(default="x"), Field(default_factory=str)])
def test_a_default_inside_annotated_is_refused_pointing_to_the_signature(default: object) -> None:
    """R9.7: a ``Field`` default inside ``Annotated`` would leave the argument required
    here: refused, naming the parameter and where a default goes."""

    def echo(value: str) -> str:
        """Echo."""
        return value

    echo.__annotations__["value"] = Annotated[str, default]
    with pytest.raises(TypeError, match=r"echo\(value\): a default in Field.* the signature"):
        tool(echo)


def test_a_predicate_of_no_function_is_refused_when_decorated() -> None:
    """R9.7: ``Predicate(5)`` could never run: a ``TypeError`` naming the parameter."""

    def echo(value: str) -> str:
        """Echo."""
        return value

    echo.__annotations__["value"] = Annotated[str, annotated_types.Predicate(5)]  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"echo\(value\): Predicate needs a function, got 5"):
        tool(echo)


async def test_a_strict_integer_refuses_a_float_and_other_strict_types_hold_already() -> None:
    """R9.7: pydantic's ``StrictInt`` refuses JSON's ``2.0``, which an ``int`` reads as ``2``;
    a string, a boolean and a number are taken strictly by their JSON types anyway."""

    @tool
    def take(
        count: pydantic.StrictInt,
        name: pydantic.StrictStr,
        flag: pydantic.StrictBool,
        ratio: pydantic.StrictFloat,
    ) -> str:
        """Take."""
        return repr((count, name, flag, ratio))

    good = await _call(take, {"count": 2, "name": "a", "flag": True, "ratio": 1})
    assert good.content == (Text("(2, 'a', True, 1.0)"),)
    refused = await _call(take, {"count": 2.0, "name": "a", "flag": True, "ratio": 1})
    assert "count: must be an integer (strict), got 2.0" in _refusal(refused)


class _Marker:
    """Another library's metadata: says nothing of the value."""


async def test_settings_that_hold_anyway_and_other_markers_pass() -> None:
    """R9.7: what says nothing of an argument's value leaves the tool as it was: a lax
    ``strict=False``, ``allow_inf_nan`` (JSON holds no infinity), settings at their
    defaults, serializers, schema annotations, a unit, and other libraries' metadata."""

    @tool
    def echo(
        value: Annotated[
            float,
            Field(strict=False, allow_inf_nan=False, coerce_numbers_to_str=False),
            Field(union_mode="smart"),
            pydantic.FailFast(),
            pydantic.PlainSerializer(str),
            pydantic.Tag("number"),
            pydantic.json_schema.Examples([1.5]),
            annotated_types.Unit("m"),
            _Marker(),
        ],
    ) -> str:
        """Echo."""
        return repr(value)

    assert echo.parameters["properties"] == {"value": {"type": "number"}}
    assert (await _call(echo, {"value": 1})).content == (Text("1.0"),)


_Small = NewType("_Small", Annotated[int, annotated_types.Le(3)])
_Word = NewType("_Word", Annotated[str, Field(pattern="^[a-z]+$")])


def _at_most(x: Annotated[_Small, annotated_types.Le(10)]) -> str:
    return str(x)


def _starting(x: Annotated[_Word, Field(pattern="^a")]) -> str:
    return x


@pytest.mark.parametrize(
    ("fn", "value", "why"),
    [
        (_at_most, 7, "x: must be <= 3, got 7"),
        (_starting, "aBC", 'x: must match the pattern "^[a-z]+$"'),
        (_starting, "bc", 'x: must match the pattern "^a"'),
    ],
)
async def test_a_bound_around_an_annotated_newtype_keeps_the_newtypes_own(
    fn: Callable[..., str], value: object, why: str
) -> None:
    """R9.3: a ``NewType`` of an ``Annotated`` type keeps its bound when ``Annotated`` adds
    one of the same kind around it: the tighter maximum, both patterns; the outer one does
    not replace it, leaving the NewType's unchecked."""
    refusal = _refusal(await _call(tool(fn), {"x": value}))
    assert refusal == f'Error: invalid arguments for tool "{fn.__name__}": {why}'
