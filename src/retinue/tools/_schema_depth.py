"""How deeply a tool's parameter schema may nest: as deeply as any JSON value (R9.7).

Past ``MAX_JSON_DEPTH`` levels the schema could be neither frozen nor sent. A
schema that deep comes from a type hint that deep, so the refusal names the
parameter whose hint it is, as a hint too deep for Python's stack is named.
"""

from __future__ import annotations

from collections.abc import Mapping

from retinue._lossless import JSON_LEVELS, MAX_JSON_DEPTH, deeper_than

from ._defs import REF_PREFIX
from ._hints import HintTooDeepError

__all__ = ["check_depth"]

# A property's schema sits two levels into the parameters, under the root and its
# "properties"; a record described once sits as deep, under the root and its "$defs".
_SCHEMA_DEPTH = MAX_JSON_DEPTH - 2


def check_depth(
    parameters: Mapping[str, object], definitions: Mapping[str, object], where: str
) -> None:
    """Refuse a property whose schema nests past what a JSON value may, naming its parameter.

    A record under ``$defs`` nested so deeply is refused naming the first
    parameter whose schema refers to it, itself or through other records.

    Raises:
        HintTooDeepError: a property's schema, or a record's it refers to, is nested too deeply.
    """
    too_deep = {
        name
        for name, schema in definitions.items()
        if deeper_than(schema, _SCHEMA_DEPTH, JSON_LEVELS)
    }
    properties = parameters.get("properties")
    assert isinstance(properties, Mapping)
    for name, schema in properties.items():
        if deeper_than(schema, _SCHEMA_DEPTH, JSON_LEVELS) or (
            too_deep and _refers_to(schema, too_deep, definitions)
        ):
            why = f"its schema would nest more than {MAX_JSON_DEPTH} levels"
            raise HintTooDeepError(f"{where}({name})", why)


def _refers_to(schema: object, names: set[str], definitions: Mapping[str, object]) -> bool:
    """Whether *schema* refers to a record of *names*, itself or through other records.

    A loop, not a recursion: the records it follows may nest past the stack.
    """
    pending, followed = [schema], set[str]()
    while pending:
        node = pending.pop()
        if type(node) is dict:
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith(REF_PREFIX):
                name = reference.removeprefix(REF_PREFIX)
                if name in names:
                    return True
                if name not in followed:
                    followed.add(name)
                    pending.append(definitions[name])
            pending.extend(node.values())
        elif type(node) is list:
            pending.extend(node)
    return False
