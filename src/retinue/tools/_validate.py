"""The argument validator: a tool's arguments checked against its JSON schema.

It enforces the keywords of :data:`._keywords.ENFORCED`: ``type`` (a name or a
list of names), ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``propertyNames``, ``minProperties``,
``maxProperties``, ``items``, ``prefixItems``, ``minItems``, ``maxItems``,
``uniqueItems``, ``minimum``, ``maximum``, ``exclusiveMinimum``,
``exclusiveMaximum``, ``multipleOf``, ``minLength``, ``maxLength``,
``pattern``, ``allOf``, ``anyOf``, ``oneOf``, ``not`` and local ``$ref``s (to
``$defs`` or ``definitions``, recursive ones too). :func:`make_validator`
refuses a schema holding anything else but annotations. Pure and synchronous.

An ``integer`` may be written ``3.0``, as JSON Schema allows, but only below
2**53 in magnitude: a number written with a fraction or an exponent arrives as
a float, and past that bound the float no longer says which integer was
written (``1e25`` reads as 10000000000000000905969664), so it is refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

from retinue._jsonschema import (
    CONSTRAINTS,
    MAX_REF_HOPS,
    constraint_problem,
    is_inexact_integer,
    is_type,
    json_key,
    json_type_name,
    resolve_ref,
    schema_list,
    type_names,
)

from ._acceptor import compile_acceptor
from ._keywords import ANNOTATIONS, check_parameters
from ._refusals import brief, choices, inexact, same, show, tags_matched, wants_integer

__all__ = ["compile_acceptor", "json_type_name", "make_validator", "validate"]

_ROOT = "arguments"

# The keywords of a node beyond its type, choices and structure.
_CONSTRAINTS = CONSTRAINTS | {"$ref", "allOf", "anyOf", "oneOf", "not"}

# ``dict`` first: a frozen JSON object is one, told apart without the slower ABC check.
# A tuple, built once: ``dict | Mapping`` would build a union at every check.
_OBJECTS = (dict, Mapping)


def _join(path: str, key: str) -> str:
    return key if path == _ROOT else f"{path}.{key}"


def validate(
    value: object,
    schema: Mapping[str, object],
    path: str = _ROOT,
    *,
    root: Mapping[str, object] | None = None,
) -> str | None:
    """Return the first problem as ``"<path>: <what>"``, or ``None`` if *value* conforms.

    The root is called ``arguments``; nested paths read ``city``, ``items[2]``,
    ``options.units``. A ``$ref`` is resolved in *root* (default: *schema*).
    Never raises for any value, nor for a schema :func:`make_validator` accepts.
    """
    return _validate(value, schema, path, schema if root is None else root)


def _validate(value: object, schema: object, path: str, root: Mapping[str, object]) -> str | None:
    if not isinstance(schema, _OBJECTS):
        return f"{path}: not allowed" if schema is False else None
    problem = _node_problem(value, schema, path, root)
    if problem is None:
        if isinstance(value, list | tuple):
            return _check_items(value, schema, path, root)
        if isinstance(value, _OBJECTS):
            return _check_object(value, schema, path, root)
    return problem


def _node_problem(
    value: object, schema: Mapping[str, object], path: str, root: Mapping[str, object]
) -> str | None:
    """The first problem of *value* itself: its type, choices, constraints and composition."""
    problem = _check_type(value, schema, path)
    if problem is None and ("enum" in schema or "const" in schema):
        problem = _check_choices(value, schema, path)
    # Most nodes hold none of these: one look at the keys spares each its own.
    if problem is None and not _CONSTRAINTS.isdisjoint(schema):
        problem = constraint_problem(value, schema, path) or _check_composition(
            value, schema, path, root
        )
    return problem


def _check_type(value: object, schema: Mapping[str, object], path: str) -> str | None:
    names = type_names(schema)
    if names is None or any(is_type(value, name) for name in names):
        return None
    if "integer" in names and is_inexact_integer(value):
        return inexact(value, path)
    return f"{path}: expected {' or '.join(names)}, got {json_type_name(value)}"


def _check_choices(value: object, schema: Mapping[str, object], path: str) -> str | None:
    if "enum" in schema:
        options = schema["enum"]
        key = json_key(value)
        if isinstance(options, Sequence) and not any(json_key(o) == key for o in options):
            return f"{path}: must be one of {', '.join(show(o) for o in options)}"
    if "const" in schema and not same(value, schema["const"]):
        return f"{path}: must be {show(schema['const'])}"
    return None


def _check_composition(
    value: object, schema: Mapping[str, object], path: str, root: Mapping[str, object]
) -> str | None:
    if "$ref" in schema:
        target = resolve_ref(root, schema["$ref"])
        if target is None:
            return f"{path}: the schema's $ref {show(schema['$ref'])} leads nowhere"
        problem = _validate(value, target, path, root)
        if problem is not None:
            return problem
    for member in schema_list(schema.get("allOf")):
        problem = _validate(value, member, path, root)
        if problem is not None:
            return problem
    if "anyOf" in schema:
        problem = _check_any_of(value, schema_list(schema["anyOf"]), path, root)
        if problem is not None:
            return problem
    if "oneOf" in schema:
        problem = _check_one_of(value, schema_list(schema["oneOf"]), path, root)
        if problem is not None:
            return problem
    if "not" in schema and _validate(value, schema["not"], path, root) is None:
        return f"{path}: must not match {brief(schema['not'])}"
    return None


def _check_one_of(
    value: object, members: Sequence[object], path: str, root: Mapping[str, object]
) -> str | None:
    matched = [i for i, m in enumerate(members) if _validate(value, m, path, root) is None]
    if len(matched) == 1:
        return None
    if not matched:
        return _check_any_of(value, members, path, root)
    return (
        f"{path}: must match exactly one choice of its oneOf, "
        f"but matches [{matched[0]}] and [{matched[1]}]"
    )


def _check_any_of(
    value: object, members: Sequence[object], path: str, root: Mapping[str, object]
) -> str | None:
    # A member that only refers to another schema is read as that schema: its type and
    # choices then shape the message.
    members = [_followed(member, root) for member in members]
    problems: list[str] = []
    for member in members:
        if not isinstance(member, Mapping | bool):
            continue
        problem = _validate(value, member, path, root)
        if problem is None:
            return None
        problems.append(problem)
    if not problems:
        return None
    missed = _missed_choices(value, members, path, root)
    if missed is not None:
        return f"{path}: must be one of {', '.join(show(o) for o in missed)}"
    # Prefer a member whose type matched: its complaint is the more specific one; among
    # those, one whose tag properties (a const each, as a discriminated union has) match.
    tried = [m for m in members if isinstance(m, Mapping | bool)]
    typed = [
        (member, problem)
        for member, problem in zip(tried, problems, strict=True)
        if isinstance(member, Mapping) and _check_type(value, member, path) is None
    ]
    if typed:
        return max(typed, key=lambda pair: tags_matched(value, pair[0]))[1]
    if is_inexact_integer(value) and any(wants_integer(member) for member in tried):
        return inexact(value, path)
    types = list(
        dict.fromkeys(str(m.get("type")) for m in members if isinstance(m, Mapping) and "type" in m)
    )
    return (
        f"{path}: expected {' or '.join(types) or 'a matching value'}, got {json_type_name(value)}"
    )


def _followed(member: object, root: Mapping[str, object]) -> object:
    """*member*, or the schema it refers to when a ``$ref`` and annotations are all it holds."""
    for _ in range(MAX_REF_HOPS):
        if not isinstance(member, Mapping) or "$ref" not in member:
            return member
        if any(key != "$ref" and key not in ANNOTATIONS for key in member):
            return member
        target = resolve_ref(root, member["$ref"])
        if target is None:
            return member
        member = target
    return member


def _missed_choices(
    value: object, members: Sequence[object], path: str, root: Mapping[str, object]
) -> list[object] | None:
    """Every choice of the members *value* fails only by its value (enum, const), when several.

    ``Literal["auto"] | Unit`` then lists ``auto`` and the units, not the first set alone.
    """
    merged: list[object] = []
    sets = 0
    for member in members:
        if not isinstance(member, Mapping):
            continue
        options = choices(member)
        rest = {k: v for k, v in member.items() if k not in ("enum", "const")}
        if options is None or _validate(value, rest, path, root) is not None:
            continue
        sets += 1
        for option in options:
            if not any(same(option, seen) for seen in merged):
                merged.append(option)
    return merged if sets > 1 else None


def _check_items(
    value: Sequence[object], schema: Mapping[str, object], path: str, root: Mapping[str, object]
) -> str | None:
    prefix = schema_list(schema.get("prefixItems"))
    for index, (item, member) in enumerate(zip(value, prefix, strict=False)):
        problem = _validate(item, member, f"{path}[{index}]", root)
        if problem is not None:
            return problem
    items = schema.get("items")
    if not isinstance(items, Mapping | bool):
        return None
    for index in range(len(prefix), len(value)):
        problem = _validate(value[index], items, f"{path}[{index}]", root)
        if problem is not None:
            return problem
    return None


def _check_object(
    value: Mapping[object, object],
    schema: Mapping[str, object],
    path: str,
    root: Mapping[str, object],
) -> str | None:
    return next(_object_problems(value, schema, path, root), None)


def _object_problems(
    value: Mapping[object, object],
    schema: Mapping[str, object],
    path: str,
    root: Mapping[str, object],
) -> Iterator[str]:
    """The problems of an object's own keys, in order: missing, misnamed, then each property."""
    properties = schema.get("properties")
    known: Mapping[str, object] = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    if isinstance(required, Sequence) and not isinstance(required, str):
        for name in required:
            if isinstance(name, str) and name not in value:
                yield f"{_join(path, name)}: missing required property"
    names = schema.get("propertyNames")
    misnamed = None if names is None else _misnamed(value, names, path, root)
    if misnamed is not None:
        yield misnamed[1]
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        name = str(key)
        if misnamed is not None and name == misnamed[0]:
            continue  # one problem per key: its name's, not also its value's
        sub = known.get(name)
        if isinstance(sub, _OBJECTS) or type(sub) is bool:
            problem = _validate(item, sub, _join(path, name), root)
        elif name in known or extra is True:
            problem = None
        elif extra is False:
            problem = f"{_join(path, name)}: unexpected property"
        elif isinstance(extra, _OBJECTS):
            problem = _validate(item, extra, _join(path, name), root)
        else:
            problem = None
        if problem is not None:
            yield problem


def _misnamed(
    value: Mapping[object, object], names: object, path: str, root: Mapping[str, object]
) -> tuple[str, str] | None:
    """``propertyNames``: the first name refused and its problem, reported at its property."""
    if not isinstance(names, Mapping | bool):
        return None
    for key in value:
        name = str(key)
        where = _join(path, name)
        problem = _validate(name, names, where, root)
        if problem is not None:
            return name, f"{where}: property name {problem[len(where) + 2 :]}"
    return None


def make_validator(schema: Mapping[str, object]) -> Callable[[object], str | None]:
    """``validate`` against *schema*, with the compiled acceptor as a fast path.

    Raises:
        TypeError, ValueError: *schema* is not one the validator enforces as
            written (:func:`._keywords.check_parameters`).
    """
    check_parameters(schema)
    accept = compile_acceptor(schema)

    def check(value: object) -> str | None:
        if accept(value):
            return None
        return _arguments_problems(value, schema)

    return check


MAX_PROBLEMS = 5
"""How many problems of the arguments' own properties one refusal names at most."""


def _arguments_problems(value: object, schema: Mapping[str, object]) -> str | None:
    """The arguments' problem; when it is among their own properties, the others too.

    A model told only the first mistake of several fixes them one call at a time.
    """
    if not isinstance(value, _OBJECTS):
        return _validate(value, schema, _ROOT, schema)
    problem = _node_problem(value, schema, _ROOT, schema)
    if problem is not None:
        return problem
    found = _object_problems(value, schema, _ROOT, schema)
    problems = list(itertools.islice(found, MAX_PROBLEMS + 1))
    if not problems:
        return None
    more = "; and more" if len(problems) > MAX_PROBLEMS else ""
    return "; ".join(problems[:MAX_PROBLEMS]) + more
