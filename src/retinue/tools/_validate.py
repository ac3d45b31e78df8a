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

A check's work grows with the size of the arguments times that of the schema,
not exponentially with their depth: a value is judged against a ``$ref``'s
target once, however many members of an ``anyOf`` or a ``oneOf`` lead it
there, and a refusal is written from the problems found in its members, not by
judging them again. Nor does a check near Python's recursion limit, however
deeply the arguments nest (:data:`retinue._lossless.MAX_JSON_DEPTH` allows
200 levels, and a level costs several frames): a container met
``ATTEMPT_DEPTH`` levels below the start of an attempt is checked first, by
an attempt of its own on a shallow stack.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from retinue._jsonschema import (
    CONSTRAINTS,
    constraint_problem,
    is_inexact_integer,
    is_type,
    json_key,
    json_type_name,
    schema_list,
    type_names,
)

from ._acceptor import compile_acceptor
from ._composition import check_composition, followed
from ._judgements import ATTEMPT_DEPTH, Run, TooDeep, set_aside
from ._keywords import check_parameters
from ._paths import ROOT, joined
from ._refusals import inexact, one_of, same, show

__all__ = ["compile_acceptor", "conforms", "json_type_name", "make_validator", "validate"]

# The keywords of a node beyond its type, choices and structure.
_CONSTRAINTS = CONSTRAINTS | {"$ref", "allOf", "anyOf", "oneOf", "not"}

# ``dict`` first: a frozen JSON object is one, told apart without the slower ABC check.
# A tuple, built once: ``dict | Mapping`` would build a union at every check.
_OBJECTS = (dict, Mapping)


def validate(
    value: object,
    schema: Mapping[str, object],
    path: str = ROOT,
    *,
    root: Mapping[str, object] | None = None,
) -> str | None:
    """Return the first problem as ``"<path>: <what>"``, or ``None`` if *value* conforms.

    The root is called ``arguments``; nested paths read ``city``, ``items[2]``,
    ``options.units``, ``options["x.y"]`` (:mod:`._paths`). A ``$ref`` is resolved in *root* (default: *schema*).
    Never raises for any value, nor for a schema :func:`make_validator` accepts.
    """
    run = Run(schema if root is None else root)
    return _settled(run, lambda: _validate(value, schema, path, run))


def conforms(value: object, schema: Mapping[str, object], run: Run) -> bool:
    """Whether *value* conforms to *schema*, the judgements *run* already made read.

    A union converting a recursive record asks it at each level of the value: with one
    run judging by value (``Run(root, by_path=False)``), a part judged for the union
    above is read, where judging each level's whole subtree again made it quadratic.
    """
    return _settled(run, lambda: _validate(value, schema, ROOT, run)) is None


_T = TypeVar("_T")


def _settled(run: Run, attempt: Callable[[], _T]) -> _T:
    """*attempt*'s result, each container nested past :data:`ATTEMPT_DEPTH` settled first.

    A container met that deep is checked by an attempt of its own, started here, on a
    shallow stack; its judgement is kept in ``run.known``, and the attempt that met it
    runs again and reads it there. Judgements made before are read, not made again.
    """
    while True:
        run.depth = 0
        try:
            return attempt()
        except TooDeep as deep:
            _judge_deep_containers(run, deep)


def _judge_deep_containers(run: Run, deep: TooDeep) -> None:
    """Judge the container *deep* met too deep, each met too deep inside it first, on a
    shallow stack; each judgement is kept in ``run.known``."""
    waiting = [deep]
    while waiting:
        top = waiting[-1]
        run.depth = 0
        try:
            problem = _validate(top.value, top.schema, top.path, run)
        except TooDeep as deeper:
            waiting.append(deeper)
            continue
        run.known[run.key(top.value, top.schema, top.path)] = (problem, top.value, top.schema)
        waiting.pop()


def _validate(value: object, schema: object, path: str, run: Run) -> str | None:
    if not isinstance(schema, _OBJECTS):
        return f"{path}: not allowed" if schema is False else None
    if "$ref" not in schema:
        # _judge's work, written out: this is the path of most nodes, a call fewer.
        problem = _node_problem(value, schema, path, run)
        if problem is None:
            if isinstance(value, list | tuple):
                return _check_items(value, schema, path, run)
            if isinstance(value, _OBJECTS):
                return _check_object(value, schema, path, run)
        return problem
    # A recursive schema reaches one target by many paths (each member of an anyOf or a
    # oneOf refers on to it): judged once per value, the check stays linear in its size.
    schema = followed(schema, run.root)
    key = run.key(value, schema, path)
    seen = run.known.get(key)
    if seen is not None:
        return seen[0]
    if isinstance(schema, _OBJECTS):
        problem = _judge(value, schema, path, run)
    else:
        problem = f"{path}: not allowed" if schema is False else None
    run.known[key] = (problem, value, schema)
    return problem


def _judge(value: object, schema: Mapping[str, object], path: str, run: Run) -> str | None:
    problem = _node_problem(value, schema, path, run)
    if problem is None:
        if isinstance(value, list | tuple):
            return _check_items(value, schema, path, run)
        if isinstance(value, _OBJECTS):
            return _check_object(value, schema, path, run)
    return problem


def _node_problem(value: object, schema: Mapping[str, object], path: str, run: Run) -> str | None:
    """The first problem of *value* itself: its type, choices, constraints and composition."""
    problem = _check_type(value, schema, path)
    if problem is None and ("enum" in schema or "const" in schema):
        problem = _check_choices(value, schema, path)
    # Most nodes hold none of these: one look at the keys spares each its own.
    if problem is None and not _CONSTRAINTS.isdisjoint(schema):
        problem = constraint_problem(value, schema, path) or check_composition(
            value, schema, path, run, _validate
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
            return f"{path}: must be {one_of(options)}"
    if "const" in schema and not same(value, schema["const"]):
        return f"{path}: must be {show(schema['const'])}"
    return None


def _check_items(
    value: Sequence[object], schema: Mapping[str, object], path: str, run: Run
) -> str | None:
    if run.depth >= ATTEMPT_DEPTH:
        return set_aside(value, schema, path, run)
    run.depth += 1  # left as it is by a raise: each attempt starts it again at 0
    problem = _item_problem(value, schema, path, run)
    run.depth -= 1
    return problem


def _item_problem(
    value: Sequence[object], schema: Mapping[str, object], path: str, run: Run
) -> str | None:
    prefix = schema_list(schema.get("prefixItems"))
    for index, (item, member) in enumerate(zip(value, prefix, strict=False)):
        problem = _validate(item, member, f"{path}[{index}]", run)
        if problem is not None:
            return problem
    items = schema.get("items")
    if not isinstance(items, Mapping | bool):
        return None
    for index in range(len(prefix), len(value)):
        problem = _validate(value[index], items, f"{path}[{index}]", run)
        if problem is not None:
            return problem
    return None


def _check_object(
    value: Mapping[object, object],
    schema: Mapping[str, object],
    path: str,
    run: Run,
) -> str | None:
    if run.depth >= ATTEMPT_DEPTH:
        return set_aside(value, schema, path, run)
    run.depth += 1  # left as it is by a raise: each attempt starts it again at 0
    problem = next(_object_problems(value, schema, path, run), None)
    run.depth -= 1
    return problem


def _object_problems(
    value: Mapping[object, object],
    schema: Mapping[str, object],
    path: str,
    run: Run,
) -> Iterator[str]:
    """The problems of an object's own keys, in order: missing, misnamed, then each property."""
    properties = schema.get("properties")
    known: Mapping[str, object] = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    if isinstance(required, Sequence) and not isinstance(required, str):
        for name in required:
            if isinstance(name, str) and name not in value:
                yield f"{joined(path, name)}: missing required property"
    names = schema.get("propertyNames")
    misnamed = None if names is None else _misnamed(value, names, path, run)
    if misnamed is not None:
        yield misnamed[1]
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        name = str(key)
        if misnamed is not None and name == misnamed[0]:
            continue  # one problem per key: its name's, not also its value's
        sub = known.get(name)
        if isinstance(sub, _OBJECTS) or type(sub) is bool:
            problem = _validate(item, sub, joined(path, name), run)
        elif name in known or extra is True:
            problem = None
        elif extra is False:
            problem = f"{joined(path, name)}: unexpected property"
        elif isinstance(extra, _OBJECTS):
            problem = _validate(item, extra, joined(path, name), run)
        else:
            problem = None
        if problem is not None:
            yield problem


def _misnamed(
    value: Mapping[object, object], names: object, path: str, run: Run
) -> tuple[str, str] | None:
    """``propertyNames``: the first name refused and its problem, reported at its property."""
    if not isinstance(names, Mapping | bool):
        return None
    for key in value:
        name = str(key)
        where = joined(path, name)
        problem = _validate(name, names, where, run)
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
        try:
            if accept(value):
                return None
        except RecursionError:
            pass  # the acceptor recurses per level of the value: the validator need not
        try:
            return _arguments_problems(value, schema)
        except RecursionError:
            # Only a caller already near the recursion limit gets here: the validator's
            # own stack stays shallow whatever the depth of the value.
            return f"{ROOT}: nested too deeply to check"

    return check


MAX_PROBLEMS = 5
"""How many problems of the arguments' own properties one refusal names at most."""


def _arguments_problems(value: object, schema: Mapping[str, object]) -> str | None:
    """The arguments' problem; when it is among their own properties, the others too.

    A model told only the first mistake of several fixes them one call at a time.
    """
    run = Run(schema)
    try:  # the first attempt called here, not through _settled: most end in it
        return _first_problems(value, schema, run)
    except TooDeep as deep:
        _judge_deep_containers(run, deep)
    return _settled(run, lambda: _first_problems(value, schema, run))


def _first_problems(value: object, schema: Mapping[str, object], run: Run) -> str | None:
    if not isinstance(value, _OBJECTS):
        return _validate(value, schema, ROOT, run)
    problem = _node_problem(value, schema, ROOT, run)
    if problem is not None:
        return problem
    found = _object_problems(value, schema, ROOT, run)
    problems = list(itertools.islice(found, MAX_PROBLEMS + 1))
    if not problems:
        return None
    more = "; and more" if len(problems) > MAX_PROBLEMS else ""
    return "; ".join(problems[:MAX_PROBLEMS]) + more
