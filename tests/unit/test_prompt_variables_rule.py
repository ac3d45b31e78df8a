"""Assembly and render take variables by one rule: a mapping, as ``dict()`` copies one (R7.51, R7.52)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from retinue.prompt import Assembly, Section, render

SECTIONS = (Section("s", "hi {{who}}"),)


class _Keyed:
    """A mapping without the Mapping base: ``keys()`` and ``[]``, as ``dict()`` copies one."""

    def keys(self) -> list[str]:
        return ["who"]

    def __getitem__(self, name: str) -> str:
        return {"who": "Ada"}[name]


class _Lookup:
    """``[]`` alone, a KeyError for no such name: nothing to list its names by."""

    def __getitem__(self, name: str) -> str:
        if name == "who":
            return "Ada"
        raise KeyError(name)


class _IndexedLookup:
    """``[]`` alone, an IndexError for no such name."""

    def __getitem__(self, name: str) -> str:
        if name == "who":
            return "Ada"
        raise IndexError(name)


def _assembled(variables: Any) -> str:
    return Assembly(SECTIONS, [], variables).render()


def _rendered(variables: Any) -> str:
    return render(SECTIONS, variables)


USES: dict[str, tuple[Callable[[Any], str], str]] = {
    "Assembly": (_assembled, "Assembly.variables"),
    "render": (_rendered, "variables"),
}


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("variables", [{"who": "Ada"}, _Keyed()], ids=["dict", "keys"])
def test_a_mapping_is_taken_by_assembly_and_render_alike(use: str, variables: Any) -> None:
    """R7.51, R7.52: a Mapping, or an object with ``keys()`` and ``[]``, is read by name."""
    build, _ = USES[use]
    assert build(variables) == "hi Ada"


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize(
    "variables",
    [[("who", "Ada")], ["ab", "cd"], _Lookup(), _IndexedLookup()],
    ids=["pairs", "two-character strings", "lookup", "lookup raising IndexError"],
)
def test_what_is_no_mapping_is_refused_by_assembly_and_render_alike(
    use: str, variables: Any
) -> None:
    """R7.51, R7.52: pairs and a lookup with ``[]`` alone are refused with a TypeError naming the
    field, in an Assembly as in render: ``["ab", "cd"]`` is not read as two pairs, a lookup raising
    KeyError does not escape as ``KeyError: 0``, one raising IndexError is not taken as no variable
    at all, and render takes no lookup an Assembly refuses."""
    build, field = USES[use]
    with pytest.raises(TypeError) as refused:
        build(variables)
    assert str(refused.value) == (
        f"{field} must be a mapping of name to text, got {type(variables).__name__}"
    )


class _KeysNotCallable:
    keys = ("who",)

    def __getitem__(self, name: str) -> str:
        return "Ada"


class _KeysNotIterable:
    def keys(self) -> int:
        return 5

    def __getitem__(self, name: str) -> str:
        return "Ada"


class _ListsWhatItLacks:
    def keys(self) -> list[str]:
        return ["who", "b"]

    def __getitem__(self, name: str) -> str:
        return {"who": "Ada"}[name]


class _GetRaises:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def keys(self) -> list[str]:
        return ["who"]

    def __getitem__(self, name: str) -> str:
        raise self.error


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize(
    "variables",
    [
        _KeysNotCallable(),
        _KeysNotIterable(),
        _ListsWhatItLacks(),
        _GetRaises(IndexError("who")),
        _GetRaises(LookupError("who")),
        _GetRaises(AttributeError("who")),
    ],
    ids=[
        "keys not callable",
        "keys not iterable",
        "keys listing a name [] refuses",
        "[] raising IndexError",
        "[] raising LookupError",
        "[] raising AttributeError",
    ],
)
def test_a_keyed_object_that_cannot_be_read_as_a_mapping_is_refused_naming_the_field(
    use: str, variables: Any
) -> None:
    """R7.51, R7.52: an object with ``keys`` and ``[]`` that cannot be copied as a mapping is
    refused with a TypeError naming the field, not its own TypeError or KeyError escaping with
    nothing said of the variables."""
    build, field = USES[use]
    with pytest.raises(TypeError, match=rf"^{field} must be a mapping of name to text: reading"):
        build(variables)
