"""Whether a schema's records held inside themselves leave any finite value.

A record that holds itself, or one holding it, in a required field at every
level (``class Loop: next: Loop``) has no finite value: a call giving one is
refused at its deepest level, so every call is. Only records described once
under ``$defs`` can hold themselves; each other node has a value, or its own
bounds say it has none (``_satisfiable``).
"""

from __future__ import annotations

from collections.abc import Mapping

from retinue._jsonschema import is_array, schema_list, type_names

from ._defs import REF_PREFIX

__all__ = ["check_finite", "has_value", "uninhabited"]


def check_finite(
    parameters: Mapping[str, object], definitions: Mapping[str, object], where: str
) -> None:
    """Refuse a required parameter that no finite value fits.

    Raises:
        TypeError: a required parameter's type holds a record no finite value fits,
            naming the parameter and the records held in themselves.
    """
    empty = uninhabited(definitions)
    if not empty:
        return
    inhabited = frozenset(definitions.keys() - empty)
    properties = parameters.get("properties")
    assert isinstance(properties, Mapping)
    for name in schema_list(parameters.get("required")):
        if not has_value(properties.get(name), inhabited):
            records = ", ".join(sorted(empty))
            held = "holds itself" if len(empty) == 1 else "hold one another"
            raise TypeError(
                f"{where}({name}): no finite value fits its type: {records} {held} in "
                "a required field at every level, so every call would be refused; give a "
                "field of the circle a default (X | None = None)"
            )


def uninhabited(definitions: Mapping[str, object]) -> frozenset[str]:
    """The names of *definitions* no finite value fits, each a record held in itself.

    Found from the leaves up: a record has a value once each field it requires does.
    """
    inhabited: set[str] = set()
    grown = True
    while grown:
        grown = False
        for name, schema in definitions.items():
            if name not in inhabited and has_value(schema, inhabited):
                inhabited.add(name)
                grown = True
    return frozenset(definitions.keys() - inhabited)


def has_value(schema: object, inhabited: set[str] | frozenset[str]) -> bool:
    """Whether some finite value fits *schema*, the ``$defs`` named in *inhabited* having one."""
    if not isinstance(schema, Mapping):
        return True
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith(REF_PREFIX):
        return reference.removeprefix(REF_PREFIX) in inhabited
    if "anyOf" in schema:
        members = schema_list(schema["anyOf"])
        return any(has_value(member, inhabited) for member in members)
    kinds = type_names(schema)
    if kinds is None or "null" in kinds or "object" not in kinds:
        return True  # an array may be empty, a dict have no keys: only a field is required
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, Mapping) or not is_array(required):
        return True
    return all(has_value(properties.get(name), inhabited) for name in required)
