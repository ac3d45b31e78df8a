"""Signatures for the API reference, with defaults as the source writes them.

Read from the imported code with ``inspect`` and from its source with ``ast``;
used by ``api_reference.py``, beside which it lives.
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
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

WIDTH = 88
"""The longest signature line before its parameters go one to a line."""
INDENT = "    "


class _Raw(str):
    """Text printed as it is where ``inspect`` prints a default's or annotation's repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


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


def assignment(module: str, name: str) -> tuple[ast.stmt, str | None] | None:
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


def defining_module(module: str, name: str) -> str:
    """The module assigning *name*, following the imports that bring it into *module*."""
    if assignment(module, name) is not None:
        return module
    package = importlib.import_module(module).__package__ or module
    for statement in _statements(_source(module)[1].body):
        if not isinstance(statement, ast.ImportFrom):
            continue
        for alias in statement.names:
            if (alias.asname or alias.name) == name:
                relative = "." * statement.level + (statement.module or "")
                origin = importlib.util.resolve_name(relative, package)
                return defining_module(origin, alias.name)
    return module


@functools.cache
def _lines(module: str) -> list[bytes]:
    return [line.encode() for line in _source(module)[0].splitlines(keepends=True)]


def segment(module: str, node: ast.expr | ast.stmt) -> str:
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
        argument.arg: segment(function.__module__, default)
        for argument, default in pairs
        if default is not None
    }


def _field_default(module: str, value: ast.expr, *, fields: bool) -> str | None:
    """What a class-body default says: ``attrs.field(default=...)``'s or a factory's call.

    In an attrs class (*fields*) a call of a function (not of a class) may make
    the field itself: its default is then what attrs recorded.
    """
    if not isinstance(value, ast.Call):
        return segment(module, value)
    called = segment(module, value.func).rsplit(".", 1)[-1]
    if called == "Factory" and value.args:
        return f"{segment(module, value.args[0])}()"
    if called not in {"field", "ib", "attrib"}:
        return None if fields and not called[0].isupper() else segment(module, value)
    for keyword in value.keywords:
        if keyword.arg == "default":
            return segment(module, keyword.value)
        if keyword.arg == "factory":
            factory = keyword.value
            if isinstance(factory, ast.Lambda):
                return segment(module, factory.body)
            return f"{segment(module, factory)}()"
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


def annotation_text(annotation: object) -> str:
    """An annotation as written: a string stays, typing objects lose their module prefixes."""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    if annotation is type(None):
        return "None"
    if typing.get_origin(annotation) in {typing.Union, types.UnionType}:
        return " | ".join(annotation_text(member) for member in typing.get_args(annotation))
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
            annotation = _Raw(annotation_text(annotation))
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
        returns = _managed(value, annotation_text(found.return_annotation))
    return _call(prefix, _parameters(found, _defaults(value)), returns)
