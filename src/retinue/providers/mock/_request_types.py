"""The JSON types of the request fields the mock reads, refused as each API refuses them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ._asks import whole_number
from ._render import error_body
from ._values import Api

__all__ = ["type_refusal"]

# A kind is the JSON type a field must have: its test, OpenAI's name for it and
# the complaint Anthropic's validation makes.
_Kind = tuple[Callable[[object], bool], str, str]


def _is_integer(value: object) -> bool:
    return whole_number(value) is not None


_STRING: _Kind = (lambda v: isinstance(v, str), "a string", "Input should be a valid string")
_INTEGER: _Kind = (_is_integer, "an integer", "Input should be a valid integer")
_BOOLEAN: _Kind = (lambda v: type(v) is bool, "a boolean", "Input should be a valid boolean")
_ARRAY: _Kind = (lambda v: isinstance(v, list), "an array", "Input should be a valid list")
_OBJECT: _Kind = (lambda v: isinstance(v, dict), "an object", "Input should be a valid dictionary")
_TEXT_OR_ARRAY: _Kind = (
    lambda v: isinstance(v, str | list),
    "a string or an array",
    "Input should be a valid string or list",
)

# The fields each API's reply reads, their kinds, and whether each of their items
# must be an object (a message, an input item, a tool).
_FIELDS: dict[Api, tuple[tuple[str, _Kind, bool], ...]] = {
    "chat": (
        ("model", _STRING, False),
        ("messages", _ARRAY, True),
        ("stream", _BOOLEAN, False),
        ("max_tokens", _INTEGER, False),
        ("max_completion_tokens", _INTEGER, False),
        ("tools", _ARRAY, True),
    ),
    "responses": (
        ("model", _STRING, False),
        ("input", _TEXT_OR_ARRAY, True),
        ("stream", _BOOLEAN, False),
        ("max_output_tokens", _INTEGER, False),
        ("tools", _ARRAY, True),
    ),
    "messages": (
        ("model", _STRING, False),
        ("messages", _ARRAY, True),
        ("stream", _BOOLEAN, False),
        ("max_tokens", _INTEGER, False),
        ("tools", _ARRAY, True),
    ),
}


def type_refusal(api: Api, body: Mapping[str, object]) -> bytes | None:
    """The 400 error body *api* answers a field of *body* of the wrong type with, naming the
    first; ``None`` when every field the mock reads has its type.

    A null is no value of the wrong type: a missing required field is refused by an
    earlier check.
    """
    for name, kind, of_objects in _FIELDS[api]:
        value = body.get(name)
        if value is None:
            continue
        if not kind[0](value):
            return _refusal(api, (name, name), kind, value)
        if of_objects and isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, dict):
                    return _refusal(api, (f"{name}[{index}]", f"{name}.{index}"), _OBJECT, item)
    return None


def _refusal(api: Api, paths: tuple[str, str], kind: _Kind, value: object) -> bytes:
    """The error body refusing *value* at *paths* (OpenAI's, Anthropic's) for not being *kind*."""
    _test, expected, complaint = kind
    if api == "messages":
        return error_body(api, 400, f"{paths[1]}: {complaint}")
    message = (
        f"Invalid type for '{paths[0]}': expected {expected}, but got {_json_name(value)} instead."
    )
    return error_body(api, 400, message, param=paths[0], code="invalid_type")


def _json_name(value: object) -> str:
    """OpenAI's name for *value*'s JSON type."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
