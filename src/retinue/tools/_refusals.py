"""How the argument validator's refusals read: values shown as JSON, choices, tags."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from retinue._jsonschema import is_array, json_key, type_names

__all__ = [
    "LISTED_CHOICES",
    "brief",
    "choices",
    "inexact",
    "missed_tag",
    "must_be",
    "one_of",
    "same",
    "show",
    "tags_matched",
    "wants_integer",
]


def inexact(value: float, path: str) -> str:
    """Why an integer written with a fraction or an exponent past 2**53 is refused."""
    return (
        f"{path}: not exactly representable as an integer (read as the float {value!r}): "
        "a number written with a fraction or an exponent is read as a float, exact only "
        "below 2**53 (9007199254740992); write the integer's digits, with no fraction or exponent"
    )


def same(left: object, right: object) -> bool:
    """JSON equality: ``True`` is not ``1``, ``1`` is ``1.0``; arrays and objects compare deeply."""
    return json_key(left) == json_key(right)


def show(value: object) -> str:
    """A schema's value as JSON, the notation the model writes arguments in.

    Python's would read an array as ``(1, 2)`` (a frozen one is a tuple) and
    null inside one as ``None``.
    """
    return json.dumps(value, ensure_ascii=False)


# Choices a refusal lists at most: the schema the model was given lists them all, and a
# refusal naming thousands would fill the model's context with them at each wrong call.
LISTED_CHOICES = 30


def one_of(options: Sequence[object]) -> str:
    """``"one of ..."`` *options* as JSON: the first :data:`LISTED_CHOICES` and a count past them."""
    listed = ", ".join(show(option) for option in options[:LISTED_CHOICES])
    if len(options) <= LISTED_CHOICES:
        return f"one of {listed}"
    return f"one of {listed}, ... ({len(options)} choices, all listed in the schema)"


def must_be(options: Sequence[object]) -> str:
    """``must be "a"`` for one option, else ``must be one of ...``."""
    return f"must be {show(options[0])}" if len(options) == 1 else f"must be {one_of(options)}"


def brief(schema: object) -> str:
    text = json.dumps(schema, ensure_ascii=False)
    return text if len(text) <= 80 else f"{text[:77]}..."


def wants_integer(member: object) -> bool:
    return isinstance(member, Mapping) and "integer" in (type_names(member) or ())


def tags_matched(value: object, member: Mapping[str, object]) -> int:
    """How many of *member*'s tag properties *value* has, equal.

    A tag allows one value: a ``const`` (pydantic's ``Literal``), or an ``enum`` of one
    (``@tool``'s).
    """
    properties = member.get("properties")
    if not isinstance(value, Mapping) or not isinstance(properties, Mapping):
        return 0
    return sum(1 for name, sub in properties.items() if name in value and _is_tag(sub, value[name]))


def _is_tag(schema: object, value: object) -> bool:
    """Whether *schema* allows one value alone, and it is *value*."""
    tag = _tag_of(schema)
    return tag is not None and same(value, tag[0])


def _tag_of(schema: object) -> tuple[object] | None:
    """The one value *schema* allows, if it is a tag's schema."""
    if not isinstance(schema, Mapping):
        return None
    if "const" in schema:
        return (schema["const"],)
    options = schema.get("enum")
    return (options[0],) if is_array(options) and len(options) == 1 else None


def missed_tag(
    value: object, members: Sequence[Mapping[str, object]]
) -> tuple[str, list[object]] | None:
    """The tag property every one of *members* has, whose value in *value* is none of theirs.

    Its name and the members' tags: a record with a tag no member has is told them all,
    where any one member would name its own alone, or another field it wants.
    """
    if not isinstance(value, Mapping) or not members:
        return None
    properties = [member.get("properties") for member in members]
    first = properties[0]
    for name in first if isinstance(first, Mapping) else ():
        if name not in value:
            continue
        tags = [_tag_of(p.get(name)) if isinstance(p, Mapping) else None for p in properties]
        found = [tag[0] for tag in tags if tag is not None]
        if len(found) == len(members) and not any(same(value[name], tag) for tag in found):
            return name, list({json_key(tag): tag for tag in found}.values())
    return None


def choices(member: Mapping[str, object]) -> Sequence[object] | None:
    if "const" in member:
        return [member["const"]]
    options = member.get("enum")
    return options if isinstance(options, Sequence) and not isinstance(options, str) else None
