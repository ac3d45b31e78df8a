"""Recursive records in a tool's arguments: checked and converted in work linear in their
depth, as deep as a call's arguments nest (R9.3, R9.7).

The arguments are checked and converted on the trio thread before the body runs: work
growing exponentially, or with the square of the depth, stalls every agent, and a
``RecursionError`` refused a valid call. Work is counted, never timed.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Annotated

import annotated_types
import pytest

from retinue._lossless import JsonValue
from retinue.tools import _validate as validator, tool


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


def _judgements_binding(monkeypatch: pytest.MonkeyPatch, arguments: JsonValue) -> int:
    """How many judgements of a value against a schema binding *arguments* to a tool makes."""
    defined = tool(_grow)
    assert defined.bind is not None
    judged: list[int] = []
    judge = validator._validate

    def counted(*args: object) -> str | None:
        judged.append(0)
        return judge(*args)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(validator, "_validate", counted)
        with contextlib.suppress(ValueError):  # the refused tree: its work counts as much
            defined.bind(arguments)  # type: ignore[arg-type]
    return len(judged)


@pytest.mark.parametrize("leaf", [1, -1], ids=["taken", "refused"])
def test_a_union_in_a_recursive_record_judges_each_part_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch, leaf: int
) -> None:
    """R9.7: each level's union judged its whole subtree again, the work growing with the
    square of the depth (190 levels took 5 s on the trio thread); it grows with the depth."""
    levels = (25, 50, 100)
    costs = [_judgements_binding(monkeypatch, {"root": _tree(n, leaf)}) for n in levels]
    # Doubling the depth doubles the work, give or take the last attempt's few levels.
    assert costs[1] <= 2.5 * costs[0]
    assert costs[2] <= 2.5 * costs[1]
    assert costs[2] <= 25 * levels[2]


def _judgements_checking(monkeypatch: pytest.MonkeyPatch, arguments: JsonValue) -> int:
    """How many judgements of a value against a schema checking *arguments* makes."""
    defined = tool(_grow)
    judged: list[int] = []
    judge = validator._validate

    def counted(*args: object) -> str | None:
        judged.append(0)
        return judge(*args)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(validator, "_validate", counted)
        problem = defined.check_arguments(arguments)
    assert problem is not None
    assert problem.endswith(".size: expected integer, got string")
    return len(judged)


def test_a_part_both_members_of_a_union_refuse_is_judged_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R9.3: a part deep in a recursive record both members of each level's union refused
    was judged again for each member above, 2**levels times (99 levels took 2.5 s)."""
    levels = (4, 8, 12, 16)
    costs = [_judgements_checking(monkeypatch, {"root": _tree(n, "big")}) for n in levels]
    assert costs[3] <= 30 * levels[3], costs
