"""The JSON-schema keywords a tool's parameters may use, checked when the tool is built.

:func:`check_parameters` refuses a schema the argument validator could not
enforce as written, or providers would refuse: a root that is not
``"type": "object"`` or holds a combinator, an unknown type name, a malformed keyword value, a ``$ref`` that leads nowhere, or any keyword
that is neither enforced (:data:`ENFORCED`) nor a pure annotation
(:data:`ANNOTATIONS`). A constraint is thus enforced on every call or refused
once, never ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

from retinue._jsonschema import (
    is_array,
    is_number,
    json_type_name,
    pointer_tokens,
    resolve_ref,
)

__all__ = [
    "ANNOTATIONS",
    "ANNOTATION_TYPES",
    "ENFORCED",
    "PROPERTY_NAME_RULE",
    "TYPE_NAMES",
    "check_parameters",
    "is_annotation",
    "is_property_name",
    "root_definition",
]

TYPE_NAMES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})

# JSON Schema 2020-12 annotations: they describe a value and constrain nothing
# (``format`` too, by default), each of the JSON type the meta-schema gives it (a
# provider checking schemas against it refuses a tool whose annotation breaks it).
ANNOTATION_TYPES: dict[str, type | tuple[type, ...]] = {
    "$comment": str,
    "$schema": str,
    "contentEncoding": str,
    "contentMediaType": str,
    # An annotation too (JSON Schema's content vocabulary asserts nothing): pydantic
    # writes it for a ``Json[T]`` field, a string holding JSON of schema T.
    "contentSchema": (Mapping, bool),
    "deprecated": bool,
    "description": str,
    "examples": (list, tuple),
    "format": str,
    "readOnly": bool,
    "title": str,
    "writeOnly": bool,
}
# ``default`` may be any value; ``discriminator`` is OpenAPI's hint beside a ``oneOf``,
# which is enforced itself.
ANNOTATIONS = frozenset({*ANNOTATION_TYPES, "default", "discriminator"})


def is_annotation(keyword: str) -> bool:
    """Whether *keyword* only annotates a schema: one of :data:`ANNOTATIONS`, or an ``x-``
    extension (OpenAPI's convention, pydantic's ``json_schema_extra``), which no
    validator reads as a constraint."""
    return keyword in ANNOTATIONS or keyword.startswith("x-")


# What may stand beside a root ``$ref`` that is read as the definition it names.
_BESIDE_ROOT_REF = frozenset({"$defs", "definitions"})


def root_definition(schema: Mapping[str, object]) -> Mapping[str, object]:
    """*schema*, or the definition its root only refers to, with the root's other keys.

    pydantic writes a recursive model's schema as ``{"$defs": {...}, "$ref":
    "#/$defs/Node"}``: a root without ``"type": "object"``, which providers
    refuse, that says what the definition it names says. Merged into the root,
    beside the ``$defs`` its own references still point into, it is the same
    schema with its type spelled out.
    """
    ref = schema.get("$ref")
    if "type" in schema or not isinstance(ref, str):
        return schema
    if any(
        key not in _BESIDE_ROOT_REF and not is_annotation(key) for key in schema if key != "$ref"
    ):
        return schema  # a $ref with constraints beside it: left for the check to name
    target = resolve_ref(schema, ref)
    if not isinstance(target, Mapping) or target.get("type") != "object":
        return schema
    return {**target, **{key: value for key, value in schema.items() if key != "$ref"}}


def check_parameters(schema: Mapping[str, object], where: str = "parameters") -> None:
    """Refuse a tool's parameter schema the argument validator would not enforce as written.

    Raises:
        TypeError: a keyword's value is of the wrong JSON type (a schema that
            is not an object, ``"minimum": "1"``, ``"required": "a"``).
        ValueError: the root is not ``"type": "object"``, or holds ``oneOf``,
            ``anyOf``, ``allOf``, ``enum``, ``const`` or ``not`` (which
            providers refuse there); an unknown type name
            or keyword; an invalid pattern; a negative count; a ``$ref`` that
            is not local, leads nowhere, or leads back to its own schema
            without descending into a property or an item. The message names
            the keyword's JSON path (``parameters.properties.days.minimum``).
    """
    if schema.get("type") != "object":
        raise ValueError(
            f"{where}.type: a tool's arguments are a JSON object, so its schema must say "
            f'"type": "object", {_found(schema.get("type"))}'
        )
    walk = _Walk(schema, where)
    walk.schema(schema, where)
    walk.follow_refs()
    walk.refuse_cycles()
    _refuse_root_keywords(schema, where)
    properties = schema.get("properties")
    for name in properties if isinstance(properties, Mapping) else ():
        if not is_property_name(name):
            raise ValueError(
                f"{where}.properties: invalid property name {_json(name)} for a tool argument: "
                f"{PROPERTY_NAME_RULE}"
            )


# What OpenAI refuses at the top level of a function's parameters (Anthropic: the first
# three, in an ``input_schema``): either fails every request that carries the tool.
_ROOT_REFUSED = ("oneOf", "anyOf", "allOf", "enum", "const", "not")


def _refuse_root_keywords(schema: Mapping[str, object], where: str) -> None:
    for keyword in _ROOT_REFUSED:
        if keyword in schema:
            raise ValueError(
                f"{where}.{keyword}: providers refuse {_json(keyword)} at the top level of a "
                "tool's parameters; use it inside a property, or check the rule in the "
                "tool's body"
            )


# The property names Anthropic accepts in ``input_schema``: past it, it refuses every request
# that carries the tool. Only the top level's are held to it, as providers hold them:
# keys inside a nested object are not known to be.
_PROPERTY_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
PROPERTY_NAME_RULE = (
    "use 1 to 64 ASCII letters, digits, '_', '.' or '-' (the property names providers accept)"
)


def is_property_name(name: object) -> bool:
    """Whether providers accept *name* as a property of a tool's parameters."""
    return isinstance(name, str) and _PROPERTY_NAME.fullmatch(name) is not None


def _found(kind: object) -> str:
    return 'but it has no "type"' if kind is None else f"got {_json(kind)}"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Walk:
    """One pass over a schema: each node checked once, its ``$ref``s and in-place parts noted."""

    def __init__(self, root: Mapping[str, object], where: str) -> None:
        self.root = root
        self.where = where
        self.checked: set[int] = set()
        self.refs: list[tuple[int, object, str]] = []
        # node -> (subschema applied to the same value, the path of that edge)
        self.in_place: dict[int, list[tuple[object, str]]] = {}

    def schema(self, node: object, path: str) -> None:
        if isinstance(node, bool):
            return
        if not isinstance(node, Mapping):
            raise TypeError(
                f"{path}: a schema must be a JSON object or a boolean, got {json_type_name(node)}"
            )
        if id(node) in self.checked:
            return
        self.checked.add(id(node))
        for key, value in node.items():
            if is_annotation(key):
                continue
            check = _KEYWORD_CHECKS.get(key)
            if check is None:
                raise ValueError(
                    f"{path}.{key}: the argument validator does not enforce {_json(key)}: remove "
                    "it, or check the value in the tool's body (Tool.parameters lists the "
                    "keywords it enforces)"
                )
            check(self, node, value, f"{path}.{key}")

    def subschemas(
        self, owner: Mapping[str, object], value: object, path: str, *, in_place: bool
    ) -> None:
        """A non-empty array of schemas (``allOf``, ``anyOf``, ``oneOf``, ``prefixItems``)."""
        if not is_array(value):
            raise TypeError(f"{path}: must be an array of schemas, got {json_type_name(value)}")
        if not value:
            raise ValueError(f"{path}: must hold at least one schema")
        for index, member in enumerate(value):
            self.schema(member, f"{path}[{index}]")
            if in_place:
                self.in_place.setdefault(id(owner), []).append((member, f"{path}[{index}]"))

    def follow_refs(self) -> None:
        """Resolve every ``$ref``, checking a target no keyword path reached."""
        done = 0
        while done < len(self.refs):
            owner, ref, path = self.refs[done]
            done += 1
            target = resolve_ref(self.root, ref)
            if target is None:
                raise ValueError(f"{path}: {_json(ref)} {_nowhere(ref)}")
            self.schema(target, f"{self.where}{_dotted(str(ref))}")
            self.in_place.setdefault(owner, []).append((target, path))

    def refuse_cycles(self) -> None:
        """Refuse a ``$ref`` loop that never descends into a value: checking would never end."""
        state: dict[int, bool] = {}  # False while on the path from the start, True when done
        for start in list(self.in_place):
            if start not in state:
                self._visit(start, state)

    def _visit(self, start: int, state: dict[int, bool]) -> None:
        # Iterative depth-first search: a chain of references may be longer than the stack.
        state[start] = False
        stack = [(start, iter(self.in_place.get(start, ())))]
        while stack:
            node, edges = stack[-1]
            edge = next(edges, None)
            if edge is None:
                state[node] = True
                stack.pop()
                continue
            target, path = edge
            if isinstance(target, bool):
                continue
            seen = state.get(id(target))
            if seen is False:
                raise ValueError(
                    f"{path}: leads back to a schema it is part of without descending into a "
                    "property or an item: checking a value against it would never end"
                )
            if seen is None:
                state[id(target)] = False
                stack.append((id(target), iter(self.in_place.get(id(target), ()))))


def _nowhere(ref: object) -> str:
    if isinstance(ref, str) and ref.startswith("#"):
        return "leads nowhere in this schema"
    return (
        'is not a local reference: only references within this schema ("#/$defs/Name") are followed'
    )


def _dotted(ref: str) -> str:
    """``#/$defs/Node`` as the path ``.$defs.Node``."""
    return "".join(f".{part}" for part in pointer_tokens(ref) or ())


# -- what each keyword's value may be ---------------------------------------------

KeywordCheck = Callable[[_Walk, Mapping[str, object], object, str], None]


def _check_type(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    names = [value] if isinstance(value, str) else value
    if not is_array(names) or not all(isinstance(n, str) for n in names):
        raise TypeError(
            f"{path}: must be a type name or an array of type names, got {json_type_name(value)}"
        )
    if not names:
        raise ValueError(f"{path}: must name at least one type")
    for index, name in enumerate(names):
        if name not in TYPE_NAMES:
            where = path if isinstance(value, str) else f"{path}[{index}]"
            raise ValueError(
                f"{where}: unknown type {_json(name)} (the JSON types are {', '.join(sorted(TYPE_NAMES))})"
            )
    _refuse_repeats(names, path, "type")


def _refuse_repeats(names: Sequence[object], path: str, what: str) -> None:
    """Refuse a name listed twice: JSON Schema's meta-schema wants these arrays' items
    unique, and a provider checking a tool's schema against it refuses every request."""
    seen: set[object] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise ValueError(f"{path}[{index}]: {what} {_json(name)} is listed twice")
        seen.add(name)


def _check_any(_walk: _Walk, _node: Mapping[str, object], _value: object, _path: str) -> None:
    """``const``: any JSON value."""


def _check_enum(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not is_array(value):
        raise TypeError(
            f"{path}: must be an array of the allowed values, got {json_type_name(value)}"
        )


def _check_required(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not is_array(value) or not all(isinstance(n, str) for n in value):
        raise TypeError(f"{path}: must be an array of property names")
    _refuse_repeats(value, path, "property")


def _check_schema_map(walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    """``properties``, ``$defs``, ``definitions``: an object of schemas."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{path}: must be an object of schemas, got {json_type_name(value)}")
    for name, sub in value.items():
        walk.schema(sub, f"{path}.{name}")


def _check_subschema(walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    """``additionalProperties``, ``propertyNames``: one schema."""
    walk.schema(value, path)


def _check_items(walk: _Walk, node: Mapping[str, object], value: object, path: str) -> None:
    if is_array(value):
        raise TypeError(f"{path}: must be one schema (for a tuple's items use prefixItems)")
    _check_subschema(walk, node, value, path)


def _check_not(walk: _Walk, node: Mapping[str, object], value: object, path: str) -> None:
    walk.schema(value, path)
    walk.in_place.setdefault(id(node), []).append((value, path))


def _check_members(walk: _Walk, node: Mapping[str, object], value: object, path: str) -> None:
    walk.subschemas(node, value, path, in_place=True)


def _check_prefix(walk: _Walk, node: Mapping[str, object], value: object, path: str) -> None:
    walk.subschemas(node, value, path, in_place=False)


def _check_ref(walk: _Walk, node: Mapping[str, object], value: object, path: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{path}: must be a reference string, got {json_type_name(value)}")
    walk.refs.append((id(node), value, path))


def _check_number(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not is_number(value):
        raise TypeError(f"{path}: must be a number, got {json_type_name(value)}")


def _check_step(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not is_number(value):
        raise TypeError(f"{path}: must be a number, got {json_type_name(value)}")
    if value <= 0:
        raise ValueError(f"{path}: must be greater than 0, got {value!r}")


def _check_count(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not is_number(value) or value != int(value):
        raise TypeError(f"{path}: must be a whole number, got {value!r}")
    if value < 0:
        raise ValueError(f"{path}: must not be negative, got {value!r}")


def _check_pattern(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{path}: must be a regular expression string, got {json_type_name(value)}")
    try:
        re.compile(value)
    except (re.error, OverflowError) as exc:  # OverflowError: a count past 2**32 - 1
        raise ValueError(f"{path}: invalid regular expression {_json(value)}: {exc}") from None


def _check_flag(_walk: _Walk, _node: Mapping[str, object], value: object, path: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{path}: must be true or false, got {json_type_name(value)}")


_KEYWORD_CHECKS: dict[str, KeywordCheck] = {
    "type": _check_type,
    "enum": _check_enum,
    "const": _check_any,
    "properties": _check_schema_map,
    "required": _check_required,
    "additionalProperties": _check_subschema,
    "propertyNames": _check_subschema,
    "minProperties": _check_count,
    "maxProperties": _check_count,
    "items": _check_items,
    "prefixItems": _check_prefix,
    "minItems": _check_count,
    "maxItems": _check_count,
    "uniqueItems": _check_flag,
    "minimum": _check_number,
    "maximum": _check_number,
    "exclusiveMinimum": _check_number,
    "exclusiveMaximum": _check_number,
    "multipleOf": _check_step,
    "minLength": _check_count,
    "maxLength": _check_count,
    "pattern": _check_pattern,
    "allOf": _check_members,
    "anyOf": _check_members,
    "oneOf": _check_members,
    "not": _check_not,
    "$ref": _check_ref,
    "$defs": _check_schema_map,
    "definitions": _check_schema_map,
}

ENFORCED = frozenset(_KEYWORD_CHECKS)
"""The keywords the argument validator enforces on every call."""
