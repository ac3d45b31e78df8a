"""Records held in themselves in a required field at every level have no finite value: a
tool requiring one is refused when built (R9.7)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NotRequired, TypedDict

import pytest

from retinue._lossless import JsonValue
from retinue.tools import tool
from tests.unit._tool_kit import execute


@dataclasses.dataclass
class _Loop:
    next: _Loop


@dataclasses.dataclass
class _Ping:
    pong: _Pong


@dataclasses.dataclass
class _Pong:
    ping: _Ping


class _Chain(TypedDict):
    link: _Chain


def _loop(start: _Loop) -> str:
    return "never"


def _rally(serve: _Ping) -> str:
    return "never"


def _chained(first: int, chain: _Chain) -> str:
    return "never"


@pytest.mark.parametrize(
    ("fn", "said"),
    [
        (_loop, r"^_loop\(start\): no finite value fits its type: _Loop holds itself"),
        (_rally, r"^_rally\(serve\): no finite value fits its type: _Ping holds itself"),
        (_chained, r"^_chained\(chain\): no finite value fits its type: _Chain holds itself"),
    ],
)
def test_a_record_held_in_itself_in_required_fields_is_refused_when_built(
    fn: Callable[..., str], said: str
) -> None:
    """R9.7: a record holding itself (or one holding it) in a required field at every level
    has no finite value, so every call would be refused at its deepest level: it is refused
    when built, naming the parameter and the records."""
    with pytest.raises(TypeError, match=said):
        tool(fn)


@dataclasses.dataclass
class _Step:
    then: _Step | None


class _Tree(TypedDict):
    children: NotRequired[list[_Tree]]


@dataclasses.dataclass
class _Volley:
    back: list[_Volley]


def _walk(step: _Step, tree: _Tree, volley: _Volley, loop: _Loop | None = None) -> str:
    return f"{step} {tree} {volley} {loop}"


async def test_a_record_held_in_itself_that_a_value_can_end_is_taken() -> None:
    """R9.7: one that null, a missing key or an empty list ends runs, as does a parameter
    with a default that no finite value fits: it can be left out."""
    arguments: JsonValue = {"step": {"then": None}, "tree": {}, "volley": {"back": []}}
    assert await execute(tool(_walk), arguments) == (
        "_Step(then=None) {} _Volley(back=[]) None",
        None,
    )


def _fetch(start: _Loop, api_key: str) -> str:
    return api_key


def test_a_partials_refusal_names_its_function_not_its_bound_arguments() -> None:
    """R9.7: a refusal of a partial names the function it calls, never the partial's repr,
    which shows its bound arguments (a credential, say), as listeners' errors do."""
    bound = functools.partial(_fetch, api_key="sk-SECRET")
    with pytest.raises(TypeError) as refused:
        tool(name="fetch")(bound)
    assert "sk-SECRET" not in str(refused.value)
    assert str(refused.value).startswith(f"{__name__}._fetch(start): no finite value fits")
