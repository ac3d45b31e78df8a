"""Recursive records in a tool's arguments: checked and converted in work linear in their
depth, as deep as a call's arguments nest (R9.3, R9.7).

The arguments are checked and converted on the trio thread before the body runs: work
growing exponentially, or with the square of the depth, stalls every agent, and a
``RecursionError`` refused a valid call. Work is counted, never timed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import Annotated

import annotated_types
import pytest

from retinue._lossless import MAX_JSON_DEPTH, JsonValue, freeze_json
from retinue.tools import Tool, _validate as validator, tool
from retinue.tools._deep import MAX_NESTED_RECORDS
from tests.unit._tool_kit import execute


def _positive(value: int) -> bool:
    return value > 0


@dataclasses.dataclass
class _Twig:
    size: Annotated[int, annotated_types.Predicate(_positive)]
    shoots: list[_Twig | _Stem]


@dataclasses.dataclass
class _Stem:
    size: Annotated[int, annotated_types.Predicate(_positive)]
    shoots: list[_Twig | _Stem]


def _tree(levels: int, leaf: JsonValue) -> JsonValue:
    tree: JsonValue = {"size": leaf, "shoots": []}
    for _ in range(levels):
        tree = {"size": 1, "shoots": [tree]}
    return tree


def _grow(root: _Twig) -> str:
    return "ok"


@contextlib.contextmanager
def _judgements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A list growing by one item at each judgement of a value against a schema."""
    judged: list[int] = []
    judge = validator._validate

    def counted(*args: object) -> str | None:
        judged.append(0)
        return judge(*args)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(validator, "_validate", counted)
        yield judged


def _judgements_binding(monkeypatch: pytest.MonkeyPatch, arguments: JsonValue) -> int:
    """How many judgements of a value against a schema binding *arguments* to a tool makes."""
    defined = tool(_grow)
    assert defined.bind is not None
    with _judgements(monkeypatch) as judged, contextlib.suppress(ValueError):
        defined.bind(arguments)  # type: ignore[arg-type]  # a refused tree's work counts too
    return len(judged)


@pytest.mark.parametrize("leaf", [1, -1], ids=["taken", "refused"])
def test_a_union_in_a_recursive_record_judges_each_part_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch, leaf: int
) -> None:
    """R9.7: each level's union does not judge its whole subtree again, so the work grows with
    the depth, not its square (5 s on the trio thread at 190 levels)."""
    levels = (30, 60, 90)
    costs = [_judgements_binding(monkeypatch, {"root": _tree(n, leaf)}) for n in levels]
    # Doubling the depth doubles the work, give or take the last attempt's few levels;
    # squared, it would take four times as much.
    assert costs[1] <= 2.5 * costs[0]
    assert costs[2] <= 2.5 * costs[1]
    assert costs[2] <= 25 * levels[2]


def _judgements_checking(monkeypatch: pytest.MonkeyPatch, arguments: JsonValue) -> int:
    """How many judgements of a value against a schema checking *arguments* makes."""
    defined = tool(_grow)
    with _judgements(monkeypatch) as judged:
        problem = defined.check_arguments(arguments)
    assert problem is not None
    assert problem.endswith(".size: expected integer, got string")
    return len(judged)


def test_a_part_both_members_of_a_union_refuse_is_judged_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R9.3: a part deep in a recursive record that both members of each level's union refuse
    is not judged again for each member above, 2**levels times (2.5 s for 99 levels)."""
    levels = (4, 8, 12, 16)
    costs = [_judgements_checking(monkeypatch, {"root": _tree(n, "big")}) for n in levels]
    assert costs[3] <= 30 * levels[3], costs


@dataclasses.dataclass
class _Link:
    label: str
    next: _Link | _Knot | None


@dataclasses.dataclass
class _Knot:
    label: str
    next: _Link | _Knot | None


def _chain(links: int) -> JsonValue:
    """*links* records, each holding the next (the last holds null), alternately a knot."""
    value: JsonValue = None
    for index in range(links):
        value = {"label": "knot" if index % 2 else "link", "next": value}
    return value


def _length(link: _Link | _Knot | None) -> int:
    length = 0
    while link is not None:
        length, link = length + 1, link.next
    return length


def _follow() -> Callable[[_Link], str]:
    def follow(start: _Link) -> str:
        return f"{_length(start)} links"

    return follow


async def test_a_chain_as_deep_as_a_conversion_may_go_converts() -> None:
    """R9.7: a record holding the next through a union, as many records deep as a
    conversion may go, converts in a call made under trio."""
    arguments = freeze_json({"start": _chain(MAX_NESTED_RECORDS)})
    assert await execute(tool(_follow()), arguments) == (f"{MAX_NESTED_RECORDS} links", None)


async def test_a_record_nested_past_the_limit_is_refused_naming_it() -> None:
    """R9.7: one record deeper is refused, naming the limit, its path cut short; so is a
    chain a little under the 200 levels a call's arguments may nest, rather than failing
    with a RecursionError and a path of kilobytes."""
    defined = tool(_follow())
    for links in (MAX_NESTED_RECORDS + 1, MAX_JSON_DEPTH - 1):
        text, error = await execute(defined, freeze_json({"start": _chain(links)}))
        assert error is not None
        assert text.endswith(
            f"...: nested too deeply: more than {MAX_NESTED_RECORDS} records inside one another"
        )
        assert "start.next.next." in text
        assert len(text) < 200


def _anything(_value: object) -> bool:
    return True


@dataclasses.dataclass
class _A:
    b: Annotated[_B | int, annotated_types.Predicate(_anything)]


@dataclasses.dataclass
class _B:
    c: Annotated[_C | int, annotated_types.Predicate(_anything)]


@dataclasses.dataclass
class _C:
    a: Annotated[_A | int, annotated_types.Predicate(_anything)]


def _circle(levels: int) -> JsonValue:
    value: JsonValue = 1
    for index in reversed(range(levels)):
        value = {"bca"[index % 3]: value}
    return value


async def test_a_circle_of_records_used_once_each_counts_every_record() -> None:
    """R9.7: records written out where they are used, a circle (A holds B holds C holds A),
    count toward the limit as a record described under $defs does: refused naming the limit
    past it, 180 levels deep too, not a RecursionError."""

    def walk(root: _A) -> str:
        return "walked"

    defined = tool(walk)
    assert await execute(defined, freeze_json({"root": _circle(MAX_NESTED_RECORDS)})) == (
        "walked",
        None,
    )
    text, error = await execute(defined, freeze_json({"root": _circle(180)}))
    assert error is not None
    assert text.endswith(f"more than {MAX_NESTED_RECORDS} records inside one another")


def test_an_untyped_value_nested_past_the_limit_is_refused_naming_it() -> None:
    """R9.7: bound plain, nested far past any call's arguments, a value a parameter holds
    as it is is refused as too deep, not with a RecursionError's message."""

    def keep(held: list[object]) -> str:
        return "ok"

    defined = tool(keep)
    deep: list[object] = []
    for _ in range(50 * MAX_JSON_DEPTH):
        deep = [deep]
    assert defined.bind is not None
    with pytest.raises(ValueError, match="nested too deeply") as refused:
        defined.bind({"held": deep})
    assert (
        str(refused.value)
        == "held: nested too deeply: deeper than the stack left to this call holds"
    )


def _bind_with_little_stack(defined: Tool, arguments: JsonValue, frames_used: int) -> str:
    """The refusal of binding *arguments* from *frames_used* Python frames down."""
    assert defined.bind is not None
    bind = defined.bind

    def descend(frames: int) -> str:
        if frames:
            return descend(frames - 1)
        try:
            bind(arguments)  # type: ignore[arg-type]
        except ValueError as exc:
            return str(exc)
        return "bound"

    return descend(frames_used)


def test_a_record_chain_bound_with_little_stack_left_is_refused_as_too_deep() -> None:
    """R9.7: under the frames of many tools/execute middlewares, a chain within the records'
    limit that Python's stack cannot hold is refused as nested too deeply, its path cut
    short: the model gets no "maximum recursion depth exceeded" nor a path of 800
    characters."""
    defined = tool(_follow())
    chain = _chain(MAX_NESTED_RECORDS)
    assert _bind_with_little_stack(defined, {"start": chain}, 10) == "bound"
    refused = _bind_with_little_stack(defined, {"start": chain}, sys.getrecursionlimit() - 400)
    assert refused.endswith("...: nested too deeply: deeper than the stack left to this call holds")
    assert len(refused) < 200
