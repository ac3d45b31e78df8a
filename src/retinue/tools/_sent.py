"""A tool's parameters as sent to the model: what providers demand spelled out.

OpenAI refuses, on every request that carries the tool (400
``invalid_function_parameters``), an array schema without ``items``, at any
depth, and parameters without ``properties`` at the root. JSON Schema reads
an absent ``items`` or ``properties`` as the empty schema, so ``"items": {}``
and ``"properties": {}`` say the same: the schema sent has them added, and
the one the arguments are checked against is left as written (an ``items``
schema, even an empty one, would be a check per item on every call).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from retinue._jsonschema import is_array
from retinue._lossless import FrozenDict, freeze_json, thaw_json

__all__ = ["as_sent"]

# Keywords whose value is one schema, an object of schemas, or an array of schemas:
# the places a schema may hold another (never ``enum``, ``const`` or ``default``: data).
_ONE = ("items", "additionalProperties", "propertyNames", "not")
_BY_NAME = ("properties", "$defs", "definitions")
_LISTED = ("prefixItems", "allOf", "anyOf", "oneOf")


def as_sent(parameters: FrozenDict) -> FrozenDict:
    """*parameters* with ``"items": {}`` added to each array schema without ``items``
    and ``"properties": {}`` to a root without ``properties``; itself if none lacks them."""
    plain = cast("dict[str, object]", thaw_json(parameters))
    added = _fill_items(plain)
    if "properties" not in plain:
        plain["properties"] = {}
        added = True
    return cast("FrozenDict", freeze_json(plain, "parameters")) if added else parameters


def _fill_items(schema: object) -> bool:
    """Add ``"items": {}`` to each array schema in *schema* without one; whether any was."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    added = False
    if "items" not in schema and (kind == "array" or (is_array(kind) and "array" in kind)):
        schema["items"] = {}
        added = True
    for key, value in schema.items():
        if key in _ONE:
            added = _fill_items(value) or added
        elif key in _BY_NAME and isinstance(value, Mapping):
            added = _fill_each(value.values()) or added
        elif key in _LISTED and is_array(value):
            added = _fill_each(value) or added
    return added


def _fill_each(schemas: Iterable[object]) -> bool:
    added = False
    for schema in schemas:  # each one: no stop at the first that needed it
        added = _fill_items(schema) or added
    return added
