"""The argument validator's composition keywords: ``$ref``, ``allOf``, ``anyOf``, ``oneOf``
and ``not``, and the refusal a union writes from the problems its members were found to have.

A member is judged by the validator's own judge, given to each function here: these
keywords nest any schema, which that judge alone checks whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from retinue._jsonschema import (
    MAX_REF_HOPS,
    is_inexact_integer,
    is_type,
    json_key,
    json_type_name,
    resolve_ref,
    schema_list,
    type_names,
)

from ._judgements import Run
from ._keywords import is_annotation
from ._paths import joined
from ._refusals import (
    brief,
    choices,
    inexact,
    missed_tag,
    must_be,
    one_of,
    show,
    tags_matched,
    wants_integer,
)

__all__ = ["Judge", "check_composition", "followed"]

Judge: TypeAlias = Callable[[object, object, str, Run], str | None]
"""The validator's check of a value against a schema at a path: its first problem, or ``None``."""

# ``dict`` first: a frozen JSON object is one, told apart without the slower ABC check.
_OBJECTS = (dict, Mapping)


def check_composition(
    value: object, schema: Mapping[str, object], path: str, run: Run, judge: Judge
) -> str | None:
    """The first problem of *value* with the composition keywords of *schema*."""
    if "$ref" in schema:
        target = resolve_ref(run.root, schema["$ref"])
        if target is None:
            return f"{path}: the schema's $ref {show(schema['$ref'])} leads nowhere"
        problem = judge(value, target, path, run)
        if problem is not None:
            return problem
    for member in schema_list(schema.get("allOf")):
        problem = judge(value, member, path, run)
        if problem is not None:
            return problem
    if "anyOf" in schema:
        problem = _check_choice(value, schema_list(schema["anyOf"]), path, run, judge, one=False)
        if problem is not None:
            return problem
    if "oneOf" in schema:
        problem = _check_choice(value, schema_list(schema["oneOf"]), path, run, judge, one=True)
        if problem is not None:
            return problem
    if "not" in schema and judge(value, schema["not"], path, run) is None:
        return f"{path}: must not match {brief(schema['not'])}"
    return None


def _check_choice(
    value: object, members: Sequence[object], path: str, run: Run, judge: Judge, *, one: bool
) -> str | None:
    """``anyOf``, or ``oneOf`` when *one*: each member judged once, its problem kept.

    The problems of the members found are what the refusal is written from: judging
    them again to write it would double the work at each level of a recursive schema.
    """
    # A member that only refers to another schema is read as that schema: its type and
    # choices then shape the message.
    targets = [followed(member, run.root) for member in members]
    matched: list[int] = []
    problems: list[str] = []
    for index, member in enumerate(members):
        if not isinstance(targets[index], _OBJECTS) and type(targets[index]) is not bool:
            if one:  # judged as validate judges it: a malformed member holds anything
                matched.append(index)
            continue
        # Judged as written: through its $ref, a value is judged once against a record
        # however many unions around it lead there, not again for each member above.
        problem = judge(value, member, path, run)
        if problem is None:
            matched.append(index)
        else:
            problems.append(problem)
        if len(matched) == 2 or (matched and not one):
            break
    if len(matched) == 2:
        return (
            f"{path}: must match exactly one choice of its oneOf, "
            f"but matches [{matched[0]}] and [{matched[1]}]"
        )
    if matched or not problems:
        return None
    return _refusal(value, targets, problems, path, run, judge)


def _refusal(
    value: object,
    members: Sequence[object],
    problems: Sequence[str],
    path: str,
    run: Run,
    judge: Judge,
) -> str:
    """Why *value* matches none of *members*, given each one's *problems*."""
    missed = _missed_choices(value, members, path, run, judge)
    if missed is not None:
        return f"{path}: must be {one_of(missed)}"
    # Prefer a member whose type matched: its complaint is the more specific one; among
    # those, one whose tag properties (a const each, as a discriminated union has) match.
    tried = [m for m in members if isinstance(m, Mapping | bool)]
    typed = [
        (member, problem)
        for member, problem in zip(tried, problems, strict=True)
        if isinstance(member, Mapping) and _type_matches(value, member)
    ]
    if typed:
        # Tied on the most tags matched (or on none), a wrong tag field is told each value.
        score = max(tags_matched(value, member) for member, _ in typed)
        leaders = [pair for pair in typed if tags_matched(value, pair[0]) == score]
        tag = missed_tag(value, [m for m, _ in leaders]) if len(leaders) > 1 or not score else None
        if tag is not None:
            return f"{joined(path, tag[0])}: {must_be(tag[1])}"
        return leaders[0][1]
    if is_inexact_integer(value) and any(wants_integer(member) for member in tried):
        return inexact(value, path)
    types = list(
        dict.fromkeys(str(m.get("type")) for m in members if isinstance(m, Mapping) and "type" in m)
    )
    return (
        f"{path}: expected {' or '.join(types) or 'a matching value'}, got {json_type_name(value)}"
    )


def followed(member: object, root: Mapping[str, object]) -> object:
    """*member*, or the schema it refers to when a ``$ref`` and annotations are all it holds."""
    if not isinstance(member, _OBJECTS) or "$ref" not in member:
        return member  # most members: spared the loop's setup
    for _ in range(MAX_REF_HOPS):
        if not isinstance(member, _OBJECTS) or "$ref" not in member:
            return member
        if any(key != "$ref" and not is_annotation(key) for key in member):
            return member
        target = resolve_ref(root, member["$ref"])
        if target is None:
            return member
        member = target
    return member


def _missed_choices(
    value: object, members: Sequence[object], path: str, run: Run, judge: Judge
) -> list[object] | None:
    """Every choice of the members *value* fails only by its value (enum, const), when several.

    ``Literal["auto"] | Unit`` then lists ``auto`` and the units, not the first set alone.
    """
    merged: list[object] = []
    seen: set[object] = set()  # JSON-equal choices have one key: listed once, found at once
    sets = 0
    for member in members:
        if not isinstance(member, Mapping):
            continue
        options = choices(member)
        rest = run.without_choices(member)
        if options is None or judge(value, rest, path, run) is not None:
            continue
        sets += 1
        for option in options:
            key = json_key(option)
            if key not in seen:
                seen.add(key)
                merged.append(option)
    return merged if sets > 1 else None


def _type_matches(value: object, member: Mapping[str, object]) -> bool:
    """Whether *value* is of a type *member* names, or *member* names none."""
    names = type_names(member)
    return names is None or any(is_type(value, name) for name in names)
