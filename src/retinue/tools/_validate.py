"""A small JSON-schema validator for the subset tool schemas use (type, enum, objects, arrays).

Supported keywords: ``type`` (a name or a list of names), ``enum``, ``const``,
``properties``, ``required``, ``additionalProperties`` (bool or schema),
``items`` and ``anyOf``. Other keywords (``description``, ``default``, ...)
are ignored. Pure and synchronous.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

__all__ = ["compile_acceptor", "json_type_name", "make_validator", "validate"]

_ROOT = "arguments"


def json_type_name(value: object) -> str:
    """Return the JSON type name of *value* (``"object"``, ``"integer"``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _is_type(value: object, name: str) -> bool:
    actual = json_type_name(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer" and actual == "number":
        return isinstance(value, float) and value.is_integer()
    return actual == name


def _same(left: object, right: object) -> bool:
    """JSON equality: ``True`` is not ``1``; arrays and objects compare deeply."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    return left == right


def _show(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _join(path: str, key: str) -> str:
    return key if path == _ROOT else f"{path}.{key}"


def validate(value: object, schema: Mapping[str, object], path: str = _ROOT) -> str | None:
    """Return the first problem as ``"<path>: <what>"``, or ``None`` if *value* conforms.

    The root is called ``arguments``; nested paths read ``city``, ``items[2]``,
    ``options.units``. Never raises for any value or schema of the subset.
    """
    problem = _check_type(value, schema, path)
    if problem is not None:
        return problem
    if "enum" in schema:
        options = schema["enum"]
        if isinstance(options, Sequence) and not any(_same(value, o) for o in options):
            return f"{path}: must be one of {', '.join(_show(o) for o in options)}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{path}: must be {_show(schema['const'])}"
    if "anyOf" in schema:
        problem = _check_any_of(value, schema["anyOf"], path)
        if problem is not None:
            return problem
    if isinstance(value, list | tuple):
        return _check_items(value, schema, path)
    if isinstance(value, Mapping):
        return _check_object(value, schema, path)
    return None


def _check_type(value: object, schema: Mapping[str, object], path: str) -> str | None:
    wanted = schema.get("type")
    if wanted is None:
        return None
    names = (
        [wanted]
        if isinstance(wanted, str)
        else list(wanted)
        if isinstance(wanted, Sequence)
        else []
    )
    if any(isinstance(name, str) and _is_type(value, name) for name in names):
        return None
    expected = " or ".join(str(name) for name in names)
    return f"{path}: expected {expected}, got {json_type_name(value)}"


def _check_any_of(value: object, members: object, path: str) -> str | None:
    if not isinstance(members, Sequence):
        return None
    problems: list[str] = []
    for member in members:
        if not isinstance(member, Mapping):
            continue
        problem = validate(value, member, path)
        if problem is None:
            return None
        problems.append(problem)
    if not problems:
        return None
    choices = _missed_choices(value, members, path)
    if choices is not None:
        return f"{path}: must be one of {', '.join(_show(o) for o in choices)}"
    # Prefer a member whose type matched: its complaint is the more specific one.
    for member, problem in zip(members, problems, strict=False):
        if isinstance(member, Mapping) and _check_type(value, member, path) is None:
            return problem
    types = list(
        dict.fromkeys(str(m.get("type")) for m in members if isinstance(m, Mapping) and "type" in m)
    )
    return (
        f"{path}: expected {' or '.join(types) or 'a matching value'}, got {json_type_name(value)}"
    )


def _missed_choices(value: object, members: Sequence[object], path: str) -> list[object] | None:
    """Every choice of the members *value* fails only by its value (enum, const), when several.

    ``Literal["auto"] | Unit`` then lists ``auto`` and the units, not the first set alone.
    """
    merged: list[object] = []
    sets = 0
    for member in members:
        if not isinstance(member, Mapping):
            continue
        options = _choices(member)
        rest = {k: v for k, v in member.items() if k not in ("enum", "const")}
        if options is None or validate(value, rest, path) is not None:
            continue
        sets += 1
        for option in options:
            if not any(_same(option, seen) for seen in merged):
                merged.append(option)
    return merged if sets > 1 else None


def _choices(member: Mapping[str, object]) -> Sequence[object] | None:
    if "const" in member:
        return [member["const"]]
    options = member.get("enum")
    return options if isinstance(options, Sequence) and not isinstance(options, str) else None


def _check_items(value: Sequence[object], schema: Mapping[str, object], path: str) -> str | None:
    items = schema.get("items")
    if not isinstance(items, Mapping):
        return None
    for index, item in enumerate(value):
        problem = validate(item, items, f"{path}[{index}]")
        if problem is not None:
            return problem
    return None


def _check_object(
    value: Mapping[object, object], schema: Mapping[str, object], path: str
) -> str | None:
    properties = schema.get("properties")
    known: Mapping[str, object] = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    if isinstance(required, Sequence) and not isinstance(required, str):
        for name in required:
            if isinstance(name, str) and name not in value:
                return f"{_join(path, name)}: missing required property"
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        name = str(key)
        sub = known.get(name)
        if isinstance(sub, Mapping):
            problem = validate(item, sub, _join(path, name))
        elif name in known or extra is True:
            problem = None
        elif extra is False:
            problem = f"{_join(path, name)}: unexpected property"
        elif isinstance(extra, Mapping):
            problem = validate(item, extra, _join(path, name))
        else:
            problem = None
        if problem is not None:
            return problem
    return None


# -- the fast acceptor ---------------------------------------------------------
#
# A schema compiled into a predicate that says "valid" only when ``validate``
# would, and is cheap for the plain shapes tools declare. When it does not say
# "valid", ``validate`` runs and has the final word (and writes the message).

Acceptor = Callable[[object], bool]

# Keywords the acceptor does not model; a node holding one is left to ``validate``.
_SLOW_KEYWORDS = frozenset({"enum", "const", "anyOf"})


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _never(_value: object) -> bool:
    return False


def _accept_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _accept_integer(value: object) -> bool:
    return type(value) is int or (type(value) is float and value.is_integer())


_TYPE_ACCEPTORS: dict[str, Acceptor] = {
    "string": lambda value: type(value) is str,
    "integer": _accept_integer,
    "number": _accept_number,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: type(value) is tuple or type(value) is list,
    "object": lambda value: isinstance(value, dict),
}


def _type_acceptor(wanted: object) -> Acceptor | None:
    if wanted is None:
        return None
    names = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        return _never
    accepts = [_TYPE_ACCEPTORS.get(name, _never) for name in names]
    if len(accepts) == 1:
        return accepts[0]
    return lambda value: any(accept(value) for accept in accepts)


def compile_acceptor(schema: Mapping[str, object]) -> Acceptor:
    """A predicate that is ``True`` only for values ``validate(value, schema)`` accepts.

    ``False`` means "not shown valid": the caller runs :func:`validate`.
    """
    if _SLOW_KEYWORDS & schema.keys():
        return _never
    of_type = _type_acceptor(schema.get("type"))
    items, properties = schema.get("items"), schema.get("properties")
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        return _never
    item_ok = compile_acceptor(items) if isinstance(items, Mapping) else None
    known = properties if isinstance(properties, Mapping) else {}
    fields = {str(k): compile_acceptor(v) for k, v in known.items() if isinstance(v, Mapping)}
    names = frozenset(str(k) for k in known)
    required = schema.get("required")
    needed = (
        tuple(n for n in required if isinstance(n, str))
        if isinstance(required, Sequence) and not isinstance(required, str)
        else ()
    )

    if item_ok is None and not known and not needed:
        leaf = _leaf_acceptor(schema.get("type"), of_type)
        if leaf is not None:
            return leaf
    if schema.get("type") == "object":

        def accept_object(value: object) -> bool:
            return isinstance(value, dict) and _accept_object(
                value, fields, names, needed, extra=extra
            )

        return accept_object

    def accept(value: object) -> bool:
        if of_type is not None and not of_type(value):
            return False
        kind = type(value)
        if kind in _SCALARS:
            return True
        if kind is tuple or kind is list:
            return item_ok is None or all(item_ok(item) for item in value)  # type: ignore[attr-defined]
        if isinstance(value, dict):
            return _accept_object(value, fields, names, needed, extra=extra)
        return False

    return accept


def _leaf_acceptor(wanted: object, of_type: Acceptor | None) -> Acceptor | None:
    """The type check alone, when it is the whole test: no object can pass it."""
    names = [wanted] if isinstance(wanted, str) else wanted
    if of_type is None or not isinstance(names, Sequence) or "object" in names:
        return None
    return of_type


def _accept_object(
    value: dict[object, object],
    fields: dict[str, Acceptor],
    names: frozenset[str],
    needed: tuple[str, ...],
    *,
    extra: bool,
) -> bool:
    for name in needed:
        if name not in value:
            return False
    for key, item in value.items():
        if type(key) is not str:
            return False
        check = fields.get(key)
        if check is not None:
            if not check(item):
                return False
        elif not extra and key not in names:
            return False
    return True


def make_validator(schema: Mapping[str, object]) -> Callable[[object], str | None]:
    """``validate`` against *schema*, with the compiled acceptor as a fast path."""
    accept = compile_acceptor(schema)

    def check(value: object) -> str | None:
        return None if accept(value) else validate(value, schema)

    return check
