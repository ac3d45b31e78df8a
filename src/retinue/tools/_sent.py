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

__all__ = ["as_sent"]

# Keywords whose value is one schema, an object of schemas, or an array of schemas:
# the places a schema may hold another (never ``enum``, ``const`` or ``default``: data).
_ONE = ("items", "additionalProperties", "propertyNames", "not", "contentSchema")
_BY_NAME = ("properties", "$defs", "definitions")
_LISTED = ("prefixItems", "allOf", "anyOf", "oneOf")


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_flag(value: object) -> bool:
    return isinstance(value, bool)


def _is_list(value: object) -> bool:
    return isinstance(value, list)


def _is_schema(value: object) -> bool:
    return isinstance(value, dict | bool)


# Each annotation's type in JSON Schema's meta-schema (``default`` may be any value).
_ANNOTATION_TYPES = {
    "$comment": _is_text,
    "$schema": _is_text,
    "contentEncoding": _is_text,
    "contentMediaType": _is_text,
    "contentSchema": _is_schema,
    "deprecated": _is_flag,
    "description": _is_text,
    "examples": _is_list,
    "format": _is_text,
    "readOnly": _is_flag,
    "title": _is_text,
    "writeOnly": _is_flag,
}


def as_sent(parameters: FrozenDict) -> FrozenDict:
    """*parameters* with ``"items": {}`` added to each array schema without ``items``,
    ``"properties": {}`` to a root without ``properties``, and each annotation of the
    wrong JSON type left out; itself if none needs either."""
    plain = cast("dict[str, object]", thaw_json(parameters))
    added = _mend(plain)
    if "properties" not in plain:
        plain["properties"] = {}
        added = True
    return cast("FrozenDict", freeze_json(plain, "parameters")) if added else parameters


def _mend(schema: object) -> bool:
    """Add ``"items": {}`` to each array schema in *schema* without one, and leave out
    each annotation of the wrong JSON type; whether anything changed."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    wrong = [key for key, value in schema.items() if not _ANNOTATION_TYPES.get(key, _any)(value)]
    for key in wrong:
        del schema[key]
    added = bool(wrong)
    if "items" not in schema and (kind == "array" or (is_array(kind) and "array" in kind)):
        schema["items"] = {}
        added = True
    for key, value in schema.items():
        if key in _ONE:
            added = _mend(value) or added
        elif key in _BY_NAME and isinstance(value, Mapping):
            added = _mend_each(value.values()) or added
        elif key in _LISTED and is_array(value):
            added = _mend_each(value) or added
    return added


def _any(_value: object) -> bool:
    return True


def _mend_each(schemas: Iterable[object]) -> bool:
    added = False
    for schema in schemas:  # each one: no stop at the first that needed it
        added = _mend(schema) or added
    return added
