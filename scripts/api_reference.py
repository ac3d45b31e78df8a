"""Write the API reference of retinue's public packages as Markdown.

    python scripts/api_reference.py [PATH]

Each public package gets a section listing the names of its ``__all__`` in that
order; a name exported by several packages is described once, in the package
whose modules define it (else the first package exporting it), and the others
say where it is. Signatures and the first paragraph of each docstring come from
the imported code; defaults are printed as the source writes them, read from the
source with ``ast``. Without PATH the page goes to standard output.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import sys
import types
from collections.abc import Iterator, Mapping, Set as AbstractSet
from pathlib import Path

import attrs
from _api_signatures import annotation_text, assignment, defining_module, segment, signature

_SUBPACKAGES = (
    "actors config hooks loop mailbox prompt providers providers.anthropic providers.mock"
    " providers.openai session stores supervisors testing tools"
)
PACKAGES = ("retinue", *(f"retinue.{name}" for name in _SUBPACKAGES.split()), "retinue.cli")
"""The public packages in page order: the top level, the rest by name, then the command."""

INTRODUCTION = """\
# API reference

Every public name of retinue, package by package: each package's `__all__` in its
own order, with each name's kind, its signature (for a class, its constructor's)
and the first paragraph of its docstring, then a class's public methods and
properties. A name exported by several packages is described once, under the
package that defines it. The page is generated from the code:
`python scripts/api_reference.py docs/api.md` regenerates it.
"""

# A citation of a rule of the specification means nothing to a reader of this page.
_RULE = r"(?:R\d+(?:\.\d+)*(?:[-\u2013]R?\d+(?:\.\d+)*)?|SPEC(?:\s*§?\d+(?:\.\d+)*)?)"
_CITATIONS = (
    (re.compile(rf"\s*\({_RULE}(?:[,;]\s*{_RULE})*\)"), ""),
    (re.compile(rf"(?:[,;]\s*{_RULE})+(?=\))"), ""),
    (re.compile(rf"\({_RULE}(?:[,;]\s*{_RULE})*[,;]\s*"), "("),
    (re.compile(rf"\b(?:(?<=\s)by\s+|(?<=\s)under\s+)?{_RULE}'s\s+"), "the "),
    (re.compile(rf"\s*(?:[,;]\s*)?\b(?:see|per|as|of)\s+{_RULE}\b"), ""),
    (re.compile(rf"\bthe\s+{_RULE}\s+"), "the "),
)
_ROLE = re.compile(r":(?:class|func|meth|attr|data|exc|mod|obj):`~?([^`]+)`")


@attrs.frozen
class Entry:
    """One public name, described in *home*; *also* lists the other packages exporting it."""

    name: str
    home: str
    value: object
    defined_in: str
    also: tuple[str, ...]


# Text


def first_paragraph(doc: str | None) -> str:
    """The docstring's first paragraph on one line, in Markdown, without rule citations."""
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).split("\n\n", 1)[0]
    text = " ".join(line.strip() for line in paragraph.splitlines())
    text = _ROLE.sub(r"``\1``", text).replace("``", "`")
    for pattern, replacement in _CITATIONS:
        text = pattern.sub(replacement, text)
    return text


def docstring(entry: Entry) -> str | None:
    """The docstring written for the entry itself (``inspect.getdoc`` would inherit one)."""
    found = assignment(entry.defined_in, entry.name)
    if found is not None:
        return found[1]
    doc = getattr(entry.value, "__doc__", None)
    return doc if isinstance(doc, str) else None


# The public names


def kind(entry: Entry) -> str:
    """What *entry* is: class, protocol, exception, function, type alias or constant."""
    value = entry.value
    found = assignment(entry.defined_in, entry.name)
    statement = found[0] if found is not None else None
    annotation = statement.annotation if isinstance(statement, ast.AnnAssign) else None
    if annotation is not None and "TypeAlias" in segment(entry.defined_in, annotation):
        return "type alias"
    if inspect.isclass(value):
        if issubclass(value, BaseException):
            return "exception"
        return "protocol" if getattr(value, "_is_protocol", False) else "class"
    if inspect.isfunction(value):
        wrapped = inspect.unwrap(value)
        if inspect.isasyncgenfunction(wrapped) and wrapped is not value:
            return "async context manager"
        return "async function" if inspect.iscoroutinefunction(value) else "function"
    if isinstance(value, types.UnionType | types.GenericAlias) or (
        type(value).__module__ == "typing"
    ):
        return "type alias"
    return "constant"


def _defined_in(package: str, name: str, value: object) -> str:
    if inspect.isclass(value) or inspect.isfunction(value):
        return str(value.__module__)
    return defining_module(package, name)


def collect() -> dict[str, list[Entry]]:
    """Each package's entries, in ``__all__`` order, every public value in one home."""
    exporters: dict[tuple[str, int], list[str]] = {}
    values: dict[tuple[str, int], object] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            exporters.setdefault((name, id(value)), []).append(package)
            values[name, id(value)] = value
    homes: dict[str, list[Entry]] = {package: [] for package in PACKAGES}
    for key, packages in exporters.items():
        name, value = key[0], values[key]
        defined_in = _defined_in(packages[0], name, value)
        owners = [p for p in packages if defined_in == p or defined_in.startswith(f"{p}.")]
        home = max(owners, key=len) if owners else packages[0]
        also = tuple(p for p in packages if p != home)
        homes[home].append(Entry(name, home, value, defined_in, also))
    for package, entries in homes.items():
        order = importlib.import_module(package).__all__
        entries.sort(key=lambda entry: order.index(entry.name))
    return homes


def reexports(package: str, homes: Mapping[str, list[Entry]]) -> list[Entry]:
    """The entries *package* exports but another package describes, in its ``__all__`` order."""
    order = importlib.import_module(package).__all__
    found = [e for entries in homes.values() for e in entries if package in e.also]
    return sorted(found, key=lambda entry: order.index(entry.name))


# Markdown


def _fence(code: str) -> list[str]:
    return ["```python", code, "```", ""]


def _members(cls: type, public: AbstractSet[int]) -> Iterator[tuple[str, object]]:
    """Public methods and properties of *cls* and of its bases the page does not describe
    (nor those of a base it describes)."""
    described = [base for base in cls.__mro__[1:] if id(base) in public]
    covered = {klass for base in described for klass in base.__mro__}
    seen: set[str] = set()
    for base in cls.__mro__:
        if base in covered or not base.__module__.startswith("retinue"):
            continue
        for name, member in vars(base).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(member, property | staticmethod | classmethod | types.FunctionType):
                seen.add(name)
                yield name, member


def _property(name: str, member: property) -> list[str]:
    returns = inspect.signature(member.fget).return_annotation if member.fget else None
    shown = (
        name
        if returns in {None, inspect.Signature.empty}
        else f"{name}: {annotation_text(returns)}"
    )
    return [*_fence(f"property {shown}"), *_paragraph(inspect.getdoc(member))]


def _member(name: str, member: object) -> list[str]:
    if isinstance(member, property):
        return _property(name, member)
    bound = not isinstance(member, staticmethod)
    function: object = member
    if isinstance(member, staticmethod | classmethod):
        function = member.__func__
    word = "async def" if inspect.iscoroutinefunction(function) else "def"
    if isinstance(member, classmethod):
        word = f"@classmethod\n{word}"
    shown = signature(function, f"{word} {name}", bound=bound) or f"{word} {name}(...)"
    return [*_fence(shown), *_paragraph(inspect.getdoc(function))]


def _paragraph(doc: str | None) -> list[str]:
    text = first_paragraph(doc)
    return [text, ""] if text else []


def _summary(entry: Entry, kind_name: str, public: AbstractSet[int]) -> str:
    line = f"*{kind_name}*"
    if inspect.isclass(entry.value):
        bases = [f"`{base.__name__}`" for base in entry.value.__bases__ if id(base) in public]
        line += f", subclass of {', '.join(bases)}" if bases else ""
    if entry.also:
        line += "; also importable from " + ", ".join(f"`{p}`" for p in entry.also)
    return line + "."


def _alias_or_constant(entry: Entry) -> str:
    found = assignment(entry.defined_in, entry.name)
    if found is None:
        return f"{entry.name} = {entry.value!r}"
    return segment(entry.defined_in, found[0])


def render_entry(entry: Entry, public: AbstractSet[int]) -> list[str]:
    """The entry's heading, kind, signature, first paragraph and members; *public* holds
    the ids of the values the page describes."""
    kind_name = kind(entry)
    lines = [f"### `{entry.name}`", "", _summary(entry, kind_name, public), ""]
    if kind_name in {"type alias", "constant"}:
        lines += _fence(_alias_or_constant(entry))
    elif kind_name != "protocol":
        shown = signature(entry.value, entry.name) or f"{entry.name}(*args)"
        lines += _fence(shown)
    lines += _paragraph(docstring(entry))
    if inspect.isclass(entry.value) and kind_name != "type alias":
        members = [line for item in _members(entry.value, public) for line in _member(*item)]
        lines += ["Methods and properties:", "", *members] if members else []
    return lines


def render(homes: Mapping[str, list[Entry]]) -> str:
    """The whole page."""
    lines = [INTRODUCTION]
    public = {id(entry.value) for entries in homes.values() for entry in entries}
    lines += [f"- [`{package}`](#{package.replace('.', '')})" for package in PACKAGES]
    lines.append("")
    for package in PACKAGES:
        module = importlib.import_module(package)
        lines += [f"## `{package}`", "", *_paragraph(module.__doc__)]
        others = reexports(package, homes)
        if others:
            listed = ", ".join(f"`{e.name}` (`{e.home}`)" for e in others)
            lines += [f"Also exports, described under their own package: {listed}.", ""]
        for entry in homes[package]:
            lines += render_entry(entry, public)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    """Write the page to the path in *argv*, or to standard output."""
    if len(argv) > 1:
        sys.exit("usage: python scripts/api_reference.py [PATH]")
    page = render(collect())
    if argv:
        Path(argv[0]).write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
