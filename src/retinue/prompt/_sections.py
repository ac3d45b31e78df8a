"""System-prompt sections and strict ``{{variable}}`` rendering (R7.51-R7.53).

Template rule: ``{{name}}`` (whitespace around the name allowed) is replaced
by the variable's text, which is not parsed again. A ``{{`` or ``}}`` outside
such a group is an error, so a typo never reaches the model silently; write
``\\{{`` and ``\\}}`` for literal double braces. Before ``{{`` or ``}}``, a
backslash is written twice to be one: ``C:\\\\{{dir}}`` is ``C:\\`` and the
variable's text (each pair one backslash, an odd one left escaping the braces).
A backslash elsewhere is literal. A single brace is literal, next to a group
too: ``{{{name}}}`` is the text between braces.

Variables rule, for an :class:`Assembly`'s and :func:`render`'s alike: a
mapping of name to text, that is a ``collections.abc.Mapping`` or an object
with ``keys()`` and ``[]`` (what ``dict()`` copies as a mapping). Anything
else is refused with a ``TypeError`` naming the field: pairs (``["ab", "cd"]``
would read as two), text, and a lookup with ``[]`` alone, whose names an
assembly could not copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar, final

import attrs

from retinue._errors import RetinueError
from retinue._lossless import joined_surrogates, shown_short
from retinue._readonly import ReadOnlyDict
from retinue._request import ToolSchema

__all__ = ["Assembly", "PromptError", "Section", "check_template", "is_variable_name", "render"]

# Leftmost match wins: backslash pairs (one literal backslash each) before an
# escape, else a whole group, else a lone brace pair. A run of backslashes is
# matched from its first one only, so a long run before no braces is passed
# over in one step per backslash, not one scan of the run per backslash. A
# group's inside never starts with a brace: in "{{{" the first is a single
# literal brace (kept by group 3), so a leftmost "{{" cannot swallow it; a
# fourth brace leaves a lone "{{", an error like any other.
_TOKEN = re.compile(
    r"(?<!\\)((?:\\\\)*)(?:\\(\{\{|\}\})|(\{?)\{\{(?!\{)(.*?)\}\}|\{\{|\}\})", re.DOTALL
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
T = TypeVar("T")


class PromptError(RetinueError):
    """The system prompt cannot be rendered (unknown variable, malformed group)."""

    code = "PROMPT_RENDER"


@final
@attrs.frozen
class Section:
    """One system-prompt section; lower ``order`` comes first (identity -100, persona 0)."""

    name: str
    text: str
    order: int = 0


class _Variables(ReadOnlyDict[str, str | None]):
    """An assembly's variables: a ``dict`` that refuses changes, and copies and pickles as one.

    Every assemble listener receives the same assembly, so a plain dict would
    let one change what the others and the render see.
    """

    __slots__ = ()
    refusal = (
        "an Assembly's variables are read-only: return a changed copy, "
        "attrs.evolve(assembly, variables={**assembly.variables, ...})"
    )

    def __hash__(self) -> int:  # type: ignore[override]
        # An Assembly is a frozen value, hashed by its fields: as a dict's, this one's
        # hash would raise, and so would the assembly's.
        return hash(frozenset(self.items()))


def _check_variables(value: object, field: str) -> None:
    """Refuse *value* unless the variables rule (in this module's docstring) takes it."""
    if isinstance(value, Mapping):
        return
    kind = type(value)
    if not (hasattr(kind, "keys") and hasattr(kind, "__getitem__")):
        raise TypeError(f"{field} must be a mapping of name to text, got {kind.__name__}")


def _as_mapping(value: object, field: str) -> Mapping[str, str | None]:
    """*value* once the variables rule takes it: a Mapping as it is, else copied to one.

    An object whose ``keys()`` gives no names, or whose ``[]`` refuses one it lists,
    is refused naming *field*, as an object that is no mapping at all is.
    """
    _check_variables(value, field)
    if isinstance(value, Mapping):
        return value
    try:
        copied: dict[str, str | None] = dict(value)  # type: ignore[call-overload]
        return copied
    except Exception as exc:  # whatever its keys() or [] raise: it cannot be read as one
        raise TypeError(
            f"{field} must be a mapping of name to text: reading it as one failed: {exc!r}"
        ) from exc


def _variables(value: Mapping[str, str | None]) -> Mapping[str, str | None]:
    """*value* copied, read-only, once the variables rule takes it."""
    return _Variables(_as_mapping(value, "Assembly.variables"))


def _sections(value: Iterable[Section]) -> tuple[Section, ...]:
    return tuple(_items(value, "sections", "Sections"))


def _tools(value: Iterable[ToolSchema]) -> tuple[ToolSchema, ...]:
    return tuple(_items(value, "tools", "tool schemas"))


def _items(value: Iterable[T], field: str, what: str) -> Iterator[T]:
    """An iterator over *value*, refused naming *field* where it is one item or none at all.

    Text is refused too: as sections it would be one section per character.
    """
    if not isinstance(value, str | bytes | Section | ToolSchema):
        try:
            return iter(value)
        except TypeError:
            pass
    raise TypeError(f"Assembly.{field} must be {what}, got {_kind(value)}")


def _kind(value: object) -> str:
    return type(value).__name__


@final
@attrs.frozen
class Assembly:
    """What the next request's system prompt and tool list are built from (R7.51).

    A ``system-prompt/assemble`` listener receives one and returns one (often
    ``attrs.evolve(assembly, ...)``): sections are rendered in ascending
    ``order`` with ``variables``, and ``tools`` is the request's tool list.
    ``variables`` is a read-only copy of the mapping given: change it by
    returning a copy, ``attrs.evolve(assembly, variables={...})``.
    """

    sections: tuple[Section, ...] = attrs.field(converter=_sections)
    tools: tuple[ToolSchema, ...] = attrs.field(converter=_tools)
    variables: Mapping[str, str | None] = attrs.field(converter=_variables)

    def render(self) -> str:
        """The system prompt text (R7.52); see :func:`render`."""
        return render(self.sections, self.variables)


def _parse(text: str, where: str) -> list[str]:
    """*text* as alternating literal text and variable names (odd indexes).

    Raises:
        PromptError: a lone ``{{`` or ``}}``, or a group that holds no name.
    """
    if not isinstance(text, str):
        raise PromptError(f"section {shown_short(where)} is not text but {type(text).__name__}")
    pieces: list[str] = []
    # The literal text since the last group, joined once: appending to a str
    # copies it, which made a long run of escapes quadratic.
    literal: list[str] = []
    position = 0
    for match in _TOKEN.finditer(text):
        literal.append(text[position : match.start()])
        position = match.end()
        pairs, escaped, brace, inside = match.group(1, 2, 3, 4)
        literal.append(pairs[: len(pairs) // 2])
        if escaped is not None:
            literal.append(escaped)
        elif inside is not None:
            literal.append(brace)
            pieces.extend(("".join(literal), _name(inside, where)))
            literal.clear()
        else:
            raise PromptError(
                f"unbalanced variable group: a lone {match.group()[len(pairs) :]!r} at character "
                f"{match.start() + len(pairs)} in section {shown_short(where)} (write \\{{{{ or \\}}}} for "
                "literal braces, \\\\{{ for a backslash before a variable)"
            )
    literal.append(text[position:])
    pieces.append("".join(literal))
    return pieces


def is_variable_name(name: object) -> bool:
    """Whether a template can refer to *name* as ``{{name}}``: a letter or ``_``, then
    letters, digits, ``_``, ``.`` or ``-`` (ASCII only)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def _name(inside: str, where: str) -> str:
    name = inside.strip()
    if not is_variable_name(name):
        group = shown_short("{{" + inside + "}}")
        raise PromptError(f"malformed variable group {group} in section {shown_short(where)}")
    return name


def check_template(text: str, where: str) -> None:
    """Check the syntax of a section's *text* without looking up any variable.

    Raises:
        PromptError: a lone ``{{`` or ``}}``, or a malformed group, in section *where*.
    """
    _parse(text, where)


_MISSING = object()


def _interpolate(text: str, variables: Mapping[str, str | None], where: str) -> str:
    pieces = _parse(text, where)
    pieces[1::2] = [_value(name, variables, where) for name in pieces[1::2]]
    return "".join(pieces)


def _value(name: str, variables: Mapping[str, str | None], where: str) -> str:
    # Not []: a mapping's may make a value up for a missing name (a defaultdict's does).
    value = variables.get(name, _MISSING)
    if value is _MISSING:
        raise PromptError(f"unknown variable {shown_short(name)} in section {shown_short(where)}")
    if value is None:
        raise PromptError(
            f"variable {shown_short(name)} has no value (section {shown_short(where)})"
        )
    if not isinstance(value, str):
        raise PromptError(
            f"variable {shown_short(name)} is not text but {type(value).__name__} "
            f"(section {shown_short(where)})"
        )
    return value


def _checked_sections(sections: Iterable[Section]) -> list[Section]:
    """*sections* as a list, each a :class:`Section` ordered by an int.

    Checked before sorting: an order of another type would fail the sort as a
    bare ``TypeError`` comparing two values, naming neither section.
    """
    checked = list(sections)
    for section in checked:
        if not isinstance(section, Section):
            raise PromptError(f"a section is {type(section).__name__}, not a Section")
        order: object = section.order  # what a caller set, whatever the annotation says
        if not isinstance(order, int) or isinstance(order, bool):
            raise PromptError(
                f"section {shown_short(section.name)} has order {shown_short(order)}, not an int"
            )
    return checked


def render(sections: Iterable[Section], variables: Mapping[str, str | None]) -> str:
    """Render sections in ascending order, dropping empty ones, joined by blank lines.

    A surrogate pair held as two code points (half in a section's text, half in
    a variable's value, say) is rendered as its one character (R1.6).

    *variables* is what the variables rule (this module's docstring) takes: a
    mapping, or an object with ``keys()`` and ``[]``, which is copied first.

    Raises:
        PromptError: an unknown, valueless or malformed ``{{variable}}``, or
            a lone ``{{`` or ``}}`` (``\\{{`` and ``\\}}`` are literal braces,
            ``\\\\{{name}}`` a backslash and the variable's text); or an item
            that is no :class:`Section`, or a section whose ``order`` is no int.
        TypeError: *variables* is no mapping (pairs, text, a lookup with ``[]``
            alone), refused before any section is read.
    """
    variables = _as_mapping(variables, "variables")
    parts = []
    for section in sorted(_checked_sections(sections), key=lambda item: item.order):
        text = _interpolate(section.text, variables, section.name).strip()
        if text:
            parts.append(text)
    # The request header logs the prompt with its pairs joined, and a reload reads
    # them joined: the request must carry that string to be rebuilt from the log.
    return joined_surrogates("\n\n".join(parts))
