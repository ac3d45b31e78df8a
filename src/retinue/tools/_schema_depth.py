"""How deeply a tool's parameter schema may nest: as deeply as any JSON value (R9.7).

Past ``MAX_JSON_DEPTH`` levels the schema could be neither frozen nor sent. A
schema that deep comes from a type hint that deep, so the refusal names the
parameter whose hint it is, as a hint too deep for Python's stack is named.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from retinue._lossless import JSON_LEVELS, MAX_JSON_DEPTH, deeper_than

from ._defs import REF_PREFIX
from ._hints import HintTooDeepError

__all__ = ["check_depth"]

# A property's schema sits two levels into the parameters, under the root and its
# "properties"; a record described once sits as deep, under the root and its "$defs";
# the schema of **kwargs one level less deep, as the root's "additionalProperties".
_SCHEMA_DEPTH = MAX_JSON_DEPTH - 2


def check_depth(
    parameters: Mapping[str, object],
    definitions: Mapping[str, object],
    where: str,
    rest: str | None,
) -> None:
    """Refuse a parameter whose schema nests past what a JSON value may, naming it.

    *rest* names the ``**kwargs`` parameter whose schema is the parameters'
    ``additionalProperties``, if any. A record under ``$defs`` nested so deeply
    is refused naming the first parameter whose schema refers to it, itself or
    through other records.

    Raises:
        HintTooDeepError: a parameter's schema, or a record's it refers to, is nested too deeply.
    """
    too_deep = {
        name
        for name, schema in definitions.items()
        if deeper_than(schema, _SCHEMA_DEPTH, JSON_LEVELS)
    }
    for name, schema, limit in _placed(parameters, rest):
        if deeper_than(schema, limit, JSON_LEVELS) or (
            too_deep and _refers_to(schema, too_deep, definitions)
        ):
            why = f"its schema would nest more than {MAX_JSON_DEPTH} levels"
            raise HintTooDeepError(f"{where}({name})", why)


def _placed(
    parameters: Mapping[str, object], rest: str | None
) -> Iterator[tuple[str, object, int]]:
    """Each parameter's name and schema, and the most levels that schema may nest where it is."""
    properties = parameters.get("properties")
    assert isinstance(properties, Mapping)
    for name, schema in properties.items():
        yield name, schema, _SCHEMA_DEPTH
    extra = parameters.get("additionalProperties")
    if rest is not None and isinstance(extra, Mapping):
        yield rest, extra, _SCHEMA_DEPTH + 1


# Keywords whose value is data (a "$ref" in it refers to nothing), and those whose value
# maps names to schemas (a name there is no keyword).
_DATA = frozenset({"const", "default", "enum", "examples"})
_SCHEMA_MAPS = frozenset({"$defs", "dependentSchemas", "patternProperties", "properties"})


def _refers_to(schema: object, names: set[str], definitions: Mapping[str, object]) -> bool:
    """Whether *schema* refers to a record of *names*, itself or through other records.

    A loop, not a recursion: the records it follows may nest past the stack.
    """
    pending, followed = [schema], set[str]()
    while pending:
        node = pending.pop()
        if type(node) is not dict:
            if type(node) is list:  # anyOf's, allOf's or prefixItems' schemas
                pending.extend(node)
            continue
        reference = node.get("$ref")
        if type(reference) is str and reference.startswith(REF_PREFIX):
            name = reference.removeprefix(REF_PREFIX)
            if name in names:
                return True
            if name not in followed:
                followed.add(name)
                pending.append(definitions[name])
        for keyword, value in node.items():
            if keyword in _SCHEMA_MAPS and type(value) is dict:
                pending.extend(value.values())
            elif keyword not in _DATA:
                pending.append(value)
    return False
