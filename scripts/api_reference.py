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
import functools
import importlib
import importlib.util
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping, Set as AbstractSet
from pathlib import Path

import attrs

_SUBPACKAGES = (
    "actors config hooks loop mailbox prompt providers session stores supervisors testing tools"
)
PACKAGES = ("retinue", *(f"retinue.{name}" for name in _SUBPACKAGES.split()), "retinue.cli")
"""The public packages in page order: the top level, the rest by name, then the command."""
WIDTH = 88
"""The longest signature line before its parameters go one to a line."""
INDENT = "    "

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


class _Raw(str):
    """Text printed as it is where ``inspect`` prints a default's or annotation's repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


@attrs.frozen
class Entry:
    """One public name, described in *home*; *also* lists the other packages exporting it."""

    name: str
    home: str
    value: object
    defined_in: str
    also: tuple[str, ...]


# Reading the source


@functools.cache
def _source(module: str) -> tuple[str, ast.Module]:
    path = inspect.getsourcefile(importlib.import_module(module))
    assert path is not None, module
    text = Path(path).read_text(encoding="utf-8")
    return text, ast.parse(text)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A body's statements, those under ``if TYPE_CHECKING:`` (and its ``else``) included."""
    for statement in body:
        if isinstance(statement, ast.If):
            yield from _statements(statement.body)
            yield from _statements(statement.orelse)
        else:
            yield statement


def _assigned(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    return None


def _assignment(module: str, name: str) -> tuple[ast.stmt, str | None] | None:
    """The statement assigning *name* at the top of *module*, and the docstring after it."""
    statements = list(_statements(_source(module)[1].body))
    for index, statement in enumerate(statements):
        if _assigned(statement) == name:
            after = statements[index + 1] if index + 1 < len(statements) else None
            doc = None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                doc = after.value.value if isinstance(after.value.value, str) else None
            return statement, doc
    return None


def _defining_module(module: str, name: str) -> str:
    """The module assigning *name*, following the imports that bring it into *module*."""
    if _assignment(module, name) is not None:
        return module
    package = importlib.import_module(module).__package__ or module
    for statement in _statements(_source(module)[1].body):
        if not isinstance(statement, ast.ImportFrom):
            continue
        for alias in statement.names:
            if (alias.asname or alias.name) == name:
                relative = "." * statement.level + (statement.module or "")
                origin = importlib.util.resolve_name(relative, package)
                return _defining_module(origin, alias.name)
    return module


@functools.cache
def _lines(module: str) -> list[bytes]:
    return [line.encode() for line in _source(module)[0].splitlines(keepends=True)]


def _segment(module: str, node: ast.expr | ast.stmt) -> str:
    """*node*'s source text (``ast.get_source_segment`` splits the whole module per call)."""
    assert node.end_lineno is not None
    assert node.end_col_offset is not None
    lines = _lines(module)[node.lineno - 1 : node.end_lineno]
    lines[-1] = lines[-1][: node.end_col_offset]
    lines[0] = lines[0][node.col_offset :]
    return b"".join(lines).decode()


def _class_node(cls: type) -> ast.ClassDef | None:
    body: list[ast.stmt] = _source(cls.__module__)[1].body
    found: ast.ClassDef | None = None
    for part in cls.__qualname__.split("."):
        found = next(
            (s for s in _statements(body) if isinstance(s, ast.ClassDef) and s.name == part),
            None,
        )
        if found is None:
            return None
        body = found.body
    return found


def _function_node(
    function: types.FunctionType,
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    *owners, name = function.__qualname__.split(".")
    body: list[ast.stmt] = _source(function.__module__)[1].body
    if owners:
        owner = _class_node(getattr(importlib.import_module(function.__module__), owners[0]))
        if owner is None or len(owners) > 1:
            return None
        body = owner.body
    # The last definition is the implementation, after any ``@overload``.
    found = None
    for statement in _statements(body):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and statement.name == name:
            found = statement
    return found


# Defaults as the source writes them


def _function_defaults(function: object) -> dict[str, str]:
    function = inspect.unwrap(typing.cast("types.FunctionType", function))
    if not isinstance(function, types.FunctionType):
        return {}
    node = _function_node(function)
    if node is None:
        return {}
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = [
        *zip(
            positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True
        ),
        *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
    ]
    return {
        argument.arg: _segment(function.__module__, default)
        for argument, default in pairs
        if default is not None
    }


def _field_default(module: str, value: ast.expr, *, fields: bool) -> str | None:
    """What a class-body default says: ``attrs.field(default=...)``'s or a factory's call.

    In an attrs class (*fields*) a call of a function (not of a class) may make
    the field itself: its default is then what attrs recorded.
    """
    if not isinstance(value, ast.Call):
        return _segment(module, value)
    called = _segment(module, value.func).rsplit(".", 1)[-1]
    if called == "Factory" and value.args:
        return f"{_segment(module, value.args[0])}()"
    if called not in {"field", "ib", "attrib"}:
        return None if fields and not called[0].isupper() else _segment(module, value)
    for keyword in value.keywords:
        if keyword.arg == "default":
            return _segment(module, keyword.value)
        if keyword.arg == "factory":
            factory = keyword.value
            if isinstance(factory, ast.Lambda):
                return _segment(module, factory.body)
            return f"{_segment(module, factory)}()"
    return None


def _class_defaults(cls: type) -> dict[str, str]:
    """Class-body defaults by field name, the nearest class's winning."""
    found: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        node = _class_node(base) if base.__module__.startswith("retinue") else None
        for statement in node.body if node is not None else ():
            if isinstance(statement, ast.AnnAssign | ast.Assign) and statement.value is not None:
                name = _assigned(statement)
                default = _field_default(base.__module__, statement.value, fields=attrs.has(base))
                if name is not None and default is not None:
                    found[name] = default
    if not attrs.has(cls):
        return found
    return {
        field.alias: found.get(field.name) or _recorded(field.default, cls.__module__)
        for field in attrs.fields(cls)
        if field.default is not attrs.NOTHING
    }


def _recorded(default: object, module: str) -> str:
    """An attrs field's default as attrs holds it: a factory is shown called, a
    value by the name of the module's constant holding it, if one does."""
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        factory: typing.Callable[..., object] = getattr(default, "factory")  # noqa: B009
        return f"{factory.__qualname__}()" if factory.__name__ != "<lambda>" else "..."
    constants = vars(importlib.import_module(module)).items()
    named = [name for name, value in constants if value is default and name.isupper()]
    return named[0] if named and default is not None else _plain(default)


def _constructor(cls: type) -> object:
    """The function whose parameters a call of *cls* takes, for its defaults."""
    for base in cls.__mro__:
        for method in ("__init__", "__new__"):
            function = vars(base).get(method)
            if isinstance(function, types.FunctionType) and base.__module__.startswith("retinue"):
                return function
    return None


def _defaults(value: object) -> dict[str, str]:
    if inspect.isclass(value):
        # A written ``__init__`` overrides the class body; an attrs one has no source.
        return _class_defaults(value) | _function_defaults(_constructor(value))
    return _function_defaults(value)


# Signatures


def _annotation(annotation: object) -> str:
    """An annotation as written: a string stays, typing objects lose their module prefixes."""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    if annotation is type(None):
        return "None"
    if typing.get_origin(annotation) in {typing.Union, types.UnionType}:
        return " | ".join(_annotation(member) for member in typing.get_args(annotation))
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    text = repr(annotation)
    text = re.sub(r"ForwardRef\('([^']*)'\)", r"\1", text)
    return re.sub(r"\b(?:typing|collections\.abc|retinue(?:\.\w+)*)\.", "", text)


def _parameters(signature: inspect.Signature, defaults: Mapping[str, str]) -> list[str]:
    """Each parameter as the source writes it, with ``/`` and ``*`` where they belong."""
    rendered: list[str] = []
    kinds = [parameter.kind for parameter in signature.parameters.values()]
    for index, parameter in enumerate(signature.parameters.values()):
        first_keyword = parameter.kind is parameter.KEYWORD_ONLY and (
            index == 0 or kinds[index - 1] is not parameter.KEYWORD_ONLY
        )
        if first_keyword and parameter.VAR_POSITIONAL not in kinds:
            rendered.append("*")
        annotation = parameter.annotation
        default = parameter.default
        if default is not parameter.empty:
            default = _Raw(defaults.get(parameter.name) or _plain(default))
        if annotation is not parameter.empty:
            annotation = _Raw(_annotation(annotation))
        rendered.append(str(parameter.replace(annotation=annotation, default=default)))
        if parameter.kind is parameter.POSITIONAL_ONLY and (
            index + 1 == len(kinds) or kinds[index + 1] is not parameter.POSITIONAL_ONLY
        ):
            rendered.append("/")
    return rendered


def _plain(default: object) -> str:
    text = repr(default)
    if " at 0x" in text or text == "NOTHING":
        sys.exit(f"api_reference: no source for the default {text}; read it from the code")
    return text


def _call(prefix: str, parameters: list[str], returns: str) -> str:
    """``prefix(parameters) -> returns``, one parameter to a line when it is too long."""
    tail = f" -> {returns}" if returns else ""
    line = f"{prefix}({', '.join(parameters)}){tail}"
    if len(line.rsplit("\n", 1)[-1]) <= WIDTH or not parameters:
        return line
    body = "".join(f"{INDENT}{parameter},\n" for parameter in parameters)
    return f"{prefix}(\n{body}){tail}"


def _managed(value: object, returns: str) -> str:
    """What a ``@contextmanager`` or ``@asynccontextmanager`` function returns: the
    annotation is its generator's."""
    unwrapped = inspect.unwrap(typing.cast("typing.Callable[..., object]", value))
    if unwrapped is value:
        return returns
    if inspect.isasyncgenfunction(unwrapped):
        return re.sub(r"^AsyncIterator\[(.*)\]$", r"AbstractAsyncContextManager[\1]", returns)
    if inspect.isgeneratorfunction(unwrapped):
        return re.sub(r"^Iterator\[(.*)\]$", r"AbstractContextManager[\1]", returns)
    return returns


def signature(value: object, prefix: str, *, bound: bool = False) -> str | None:
    """*value*'s call signature under the name *prefix*, or None when it has none."""
    try:
        found = inspect.signature(typing.cast("typing.Callable[..., object]", value))
    except (TypeError, ValueError):
        return None
    if bound:
        parameters = list(found.parameters.values())[1:]
        found = found.replace(parameters=parameters)
    returns = ""
    if found.return_annotation is not found.empty and not inspect.isclass(value):
        returns = _managed(value, _annotation(found.return_annotation))
    return _call(prefix, _parameters(found, _defaults(value)), returns)


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
    found = _assignment(entry.defined_in, entry.name)
    if found is not None:
        return found[1]
    doc = getattr(entry.value, "__doc__", None)
    return doc if isinstance(doc, str) else None


# The public names


def kind(entry: Entry) -> str:
    """What *entry* is: class, protocol, exception, function, type alias or constant."""
    value = entry.value
    found = _assignment(entry.defined_in, entry.name)
    statement = found[0] if found is not None else None
    annotation = statement.annotation if isinstance(statement, ast.AnnAssign) else None
    if annotation is not None and "TypeAlias" in _segment(entry.defined_in, annotation):
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
    return _defining_module(package, name)


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
        name if returns in {None, inspect.Signature.empty} else f"{name}: {_annotation(returns)}"
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
    found = _assignment(entry.defined_in, entry.name)
    if found is None:
        return f"{entry.name} = {entry.value!r}"
    return _segment(entry.defined_in, found[0])


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
