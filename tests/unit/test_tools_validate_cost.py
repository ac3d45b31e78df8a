"""What one argument check costs: work linear in the arguments' depth, a stack that stays shallow.

A tool's arguments are checked on the trio thread, before its body runs (R9.3 stage 3): a
check that took exponential time in their depth would stall every agent, and one that
raised ``RecursionError`` would break the promise that invalid arguments are an error
result (R9.2). Work is counted as the validator's judgements of a value against a schema
(deterministic), never timed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from types import FrameType

import pytest

from retinue._lossless import MAX_JSON_DEPTH, FrozenDict, freeze_json
from retinue.tools import Tool, _validate as validator
from retinue.tools._acceptor import _accept_object, compile_acceptor
from retinue.tools._judgements import ATTEMPT_DEPTH

# Whole attempts deep (_judgements.ATTEMPT_DEPTH containers each): each adds the same work.
DEEP = (2 * ATTEMPT_DEPTH, 4 * ATTEMPT_DEPTH, 8 * ATTEMPT_DEPTH)


def frozen(schema: object) -> FrozenDict:
    frozen = freeze_json(schema)
    assert isinstance(frozen, FrozenDict)
    return frozen


def recursive(keyword: str) -> FrozenDict:
    """``c`` is null or an object whose ``c`` is again null or such an object."""
    node = {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]}
    return frozen(
        {
            "type": "object",
            "properties": {"c": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {keyword: [{"type": "null"}, node]}},
        }
    )


def tagged_tree() -> FrozenDict:
    """A discriminated union over a recursive expression, as pydantic writes one."""
    leaf = {"kind": {"const": "leaf"}, "value": {"type": "integer"}}
    negation = {"kind": {"const": "not"}, "arg": {"$ref": "#/$defs/Expr"}}
    both = {"kind": {"const": "and"}, "left": {"$ref": "#/$defs/Expr"}}
    both["right"] = {"$ref": "#/$defs/Expr"}
    defs: dict[str, object] = {
        name: {"type": "object", "properties": props, "required": list(props)}
        for name, props in (("Leaf", leaf), ("Not", negation), ("And", both))
    }
    refs = [{"$ref": f"#/$defs/{name}"} for name in ("Leaf", "Not", "And")]
    defs["Expr"] = {"oneOf": refs}
    return frozen(
        {"type": "object", "properties": {"expr": {"$ref": "#/$defs/Expr"}}, "$defs": defs}
    )


def chain(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = {"c": value}
    return freeze_json({"c": value})


def negations(depth: int) -> object:
    expr: object = {"kind": "leaf", "value": "oops"}
    for _ in range(depth):
        expr = {"kind": "not", "arg": expr}
    return freeze_json({"expr": expr})


@pytest.fixture
def judgements(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the validator judged a value against a schema, since the last reset."""
    count = [0]
    judge = validator._validate

    def counted(*args: object) -> str | None:
        count[0] += 1
        return judge(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(validator, "_validate", counted)
    return count


def work(count: list[int], check: Callable[[object], str | None], value: object) -> int:
    count[0] = 0
    assert check(value) is not None
    return count[0]


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf"])
def test_refusing_a_value_deep_in_a_recursive_choice_is_linear_work(
    keyword: str, judgements: list[int]
) -> None:
    """R9.3: each level of a recursive ``oneOf`` or ``anyOf`` adds the same work: a
    refusal is written from the problems its members were found to have, not by judging
    them again (twice per level: exponential in the depth)."""
    check = validator.make_validator(recursive(keyword))
    costs = [work(judgements, check, chain(depth, "bad")) for depth in (4, 8, 16)]
    assert costs[2] - costs[1] == 2 * (costs[1] - costs[0])
    # Deeper than one attempt reaches: what is met again is read, not judged again.
    deep = [work(judgements, check, chain(depth, "bad")) for depth in DEEP]
    assert deep[2] - deep[1] == 2 * (deep[1] - deep[0])


def test_refusing_a_deep_mistake_in_a_discriminated_union_is_linear_work(
    judgements: list[int],
) -> None:
    """R9.3: a recursive ``oneOf`` of ``$ref``s (pydantic's discriminated union) names the
    mistake 16 levels down with the same work per level as 4 levels down."""
    check = validator.make_validator(tagged_tree())
    costs = [work(judgements, check, negations(depth)) for depth in (4, 8, 16)]
    assert costs[2] - costs[1] == 2 * (costs[1] - costs[0])
    deep = [work(judgements, check, negations(depth)) for depth in DEEP]
    assert deep[2] - deep[1] == 2 * (deep[1] - deep[0])
    assert check(negations(16)) == f"expr.{'arg.' * 16}value: expected integer, got string"


def test_a_target_reached_by_every_member_of_a_choice_is_judged_once_per_value(
    judgements: list[int],
) -> None:
    """R9.3: two members of an ``anyOf`` that both lead to ``c``'s schema judge ``c``
    once: their shared target is not judged again for the second."""
    node = {"$ref": "#/$defs/n"}
    members = [
        {"type": "object", "properties": {"c": node, "tag": {"const": tag}}, "required": ["c"]}
        for tag in (1, 2)
    ]
    schema = frozen(
        {
            "type": "object",
            "properties": {"c": node},
            "$defs": {"n": {"anyOf": [{"type": "null"}, *members]}},
        }
    )
    check = validator.make_validator(schema)
    costs = [work(judgements, check, chain(depth, "bad")) for depth in (4, 8, 16)]
    assert costs[2] - costs[1] == 2 * (costs[1] - costs[0])


def test_accepting_a_value_both_members_of_a_recursive_choice_lead_into_is_linear_work() -> None:
    """R9.3: the fast path that accepts valid arguments tests each container once per
    ``$ref`` back into a recursive schema: a value whose first member fails after its
    ``c`` was tested, and whose second member tests ``c`` again, is not tested twice
    per level (exponential in the depth)."""
    node = {"$ref": "#/$defs/n"}
    members = [{"type": "object", "properties": {"c": node, "t": {"const": t}}} for t in (1, 2)]
    schema = frozen(
        {
            "type": "object",
            "properties": {"c": node},
            "$defs": {"n": {"anyOf": [{"type": "null"}, *members]}},
        }
    )
    accept = compile_acceptor(schema)

    def tested(depth: int) -> int:
        value: object = None
        for _ in range(depth):
            value = {"c": value, "t": 2}  # c before t: the first member tests c, then fails
        objects = [0]

        def count(frame: FrameType, event: str, _arg: object) -> None:
            if event == "call" and frame.f_code is _accept_object.__code__:
                objects[0] += 1

        frozen_value = freeze_json({"c": value})
        sys.setprofile(count)
        try:
            assert accept(frozen_value)
        finally:
            sys.setprofile(None)
        return objects[0]

    costs = [tested(depth) for depth in (4, 8, 16)]
    assert costs[2] - costs[1] == 2 * (costs[1] - costs[0])


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf"])
def test_arguments_as_deep_as_json_allows_are_checked_without_recursion_error(
    keyword: str,
) -> None:
    """R9.2: valid arguments nested to the deepest JSON the loop reads are valid, and a
    mistake at the bottom is named at its path; neither raises ``RecursionError``."""
    check = validator.make_validator(recursive(keyword))
    depth = MAX_JSON_DEPTH - 2  # the arguments object and the null leaf are levels too
    assert check(chain(depth, None)) is None
    assert check(chain(depth, "bad")) == (f"{'c.' * depth}c: expected null or object, got string")


def test_the_stack_a_deep_check_takes_is_bounded() -> None:
    """R9.2: the validator checks arguments of any depth within a bounded stack, so a
    check made where the runtime has already used most of it still succeeds."""
    schema = tagged_tree()
    check = Tool("t", "d", schema, lambda expr: expr).check_arguments
    depth = MAX_JSON_DEPTH - 3
    valid = negations(depth)
    assert isinstance(valid, FrozenDict)
    fixed = freeze_json({"expr": _with_leaf(valid["expr"], 1)})
    assert validator.validate(fixed, schema) is None
    assert _at_depth(sys.getrecursionlimit() - 400, lambda: check(fixed)) is None
    assert _at_depth(sys.getrecursionlimit() - 400, lambda: check(valid)) == (
        f"expr.{'arg.' * depth}value: expected integer, got string"
    )


def test_a_check_called_at_the_recursion_limit_is_a_refusal_not_a_raise() -> None:
    """R9.2: arguments a caller's own deep stack leaves no room to check are refused as
    too deeply nested to check, never a ``RecursionError`` out of the check."""
    check = validator.make_validator(recursive("anyOf"))
    arguments = chain(100, "bad")
    problem = _at_depth(sys.getrecursionlimit() - 60, lambda: check(arguments))
    assert problem == "arguments: nested too deeply to check"


def _with_leaf(expr: object, value: int) -> object:
    if isinstance(expr, Mapping) and "arg" in expr:
        return {"kind": "not", "arg": _with_leaf(expr["arg"], value)}
    return {"kind": "leaf", "value": value}


def _at_depth(frames: int, call: Callable[[], str | None]) -> str | None:
    """*call*'s result, called *frames* frames below the bottom of the current stack."""
    here = len(_stack())
    return _nested(frames - here, call)


def _nested(left: int, call: Callable[[], str | None]) -> str | None:
    return call() if left <= 0 else _nested(left - 1, call)


def _stack() -> list[object]:
    frames: list[object] = []
    frame = sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return frames
