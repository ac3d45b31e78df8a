"""A tool's parameters as sent to the model: what providers demand spelled out.

OpenAI refuses, on every request that carries the tool (400
``invalid_function_parameters``), an array schema without ``items``, at any
depth, and parameters without ``properties`` at the root. JSON Schema reads
an absent ``items`` or ``properties`` as the empty schema, so ``"items": {}``
and ``"properties": {}`` say the same: the schema sent has them added, and
the one the arguments are checked against is left as written (an ``items``
schema, even an empty one, would be a check per item on every call).

An annotation whose value breaks the type JSON Schema's meta-schema gives it
(``"description": null`` from a converter dumping its unset fields, pydantic's
``examples`` given as an object) makes the schema invalid to a provider that
checks schemas against the meta-schema, which then refuses every request
carrying the tool. Annotations constrain nothing, so the schema sent leaves
such a one out, and other providers lose nothing they would read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from retinue._jsonschema import is_array
from retinue._lossless import FrozenDict, freeze_json, thaw_json

from ._keywords import ANNOTATION_TYPES

__all__ = ["as_sent"]

# Keywords whose value is one schema, an object of schemas, or an array of schemas:
# the places a schema may hold another (never ``enum``, ``const`` or ``default``: data).
_ONE = ("items", "additionalProperties", "propertyNames", "not", "contentSchema")
_BY_NAME = ("properties", "$defs", "definitions")
_LISTED = ("prefixItems", "allOf", "anyOf", "oneOf")


def as_sent(parameters: FrozenDict) -> FrozenDict:
    """*parameters* with ``"items": {}`` added to each array schema without ``items``,
    ``"properties": {}`` to a root without ``properties``, and each annotation of the
    wrong JSON type left out; itself if none needs either."""
    plain = cast("dict[str, object]", thaw_json(parameters))
    changed = _mend(plain)
    if "properties" not in plain:
        plain["properties"] = {}
        changed = True
    return cast("FrozenDict", freeze_json(plain, "parameters")) if changed else parameters


def _mend(schema: object) -> bool:
    """Add ``"items": {}`` to each array schema in *schema* without one, and leave out
    each annotation of the wrong JSON type; whether anything changed."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    wrong = [
        key
        for key, value in schema.items()
        if not isinstance(value, ANNOTATION_TYPES.get(key, object))
    ]
    for key in wrong:
        del schema[key]
    changed = bool(wrong)
    if "items" not in schema and (kind == "array" or (is_array(kind) and "array" in kind)):
        schema["items"] = {}
        changed = True
    for key, value in schema.items():
        if key in _ONE:
            changed = _mend(value) or changed
        elif key in _BY_NAME and isinstance(value, Mapping):
            changed = _mend_each(value.values()) or changed
        elif key in _LISTED and is_array(value):
            changed = _mend_each(value) or changed
    return changed


def _mend_each(schemas: Iterable[object]) -> bool:
    changed = False
    for schema in schemas:  # each one: no stop at the first that needed it
        changed = _mend(schema) or changed
    return changed
