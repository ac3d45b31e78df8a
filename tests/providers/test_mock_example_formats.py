"""The mock model fills a string of a well-known ``format`` with a value of that format, as a
model does: a tool that parses its dates, ids or addresses takes what it sends."""

from __future__ import annotations

import datetime as dt
import ipaddress
import random
import re
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest

from retinue.providers.mock import example_arguments


def _email(value: str) -> object:
    local, _, domain = value.partition("@")
    assert local
    assert "." in domain
    return value


def _hostname(value: str) -> object:
    assert re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", value), value
    return value


def _duration(value: str) -> object:
    assert re.fullmatch(r"P(\d+D)?(T(\d+H)?(\d+M)?(\d+S)?)?", value), value
    assert value not in {"P", "PT"}
    return value


def _uri(value: str) -> object:
    parts = urlsplit(value)
    assert parts.scheme
    assert parts.netloc
    return parts


PARSERS: dict[str, Callable[[str], object]] = {
    "date-time": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "uuid": uuid.UUID,
    "email": _email,
    "uri": _uri,
    "hostname": _hostname,
    "duration": _duration,
    "ipv4": ipaddress.IPv4Address,
    "ipv6": ipaddress.IPv6Address,
}


@pytest.mark.parametrize("form", list(PARSERS))
@pytest.mark.parametrize("seed", range(5))
def test_a_string_of_a_known_format_is_one(form: str, seed: int) -> None:
    """A ``format`` (which pydantic writes for a datetime, a UUID, an email or a URL
    field) gets a value of that format, where it got words ("when golf") that such
    a tool refuses on every call."""
    schema = {
        "type": "object",
        "properties": {"when": {"type": "string", "format": form}},
        "required": ["when"],
    }
    value = example_arguments(schema, random.Random(seed))["when"]
    assert isinstance(value, str)
    PARSERS[form](value)


def test_a_format_whose_value_breaks_the_strings_bounds_gives_way() -> None:
    """The bounds still rule: a format whose value is longer than ``maxLength`` allows
    gives way to a string that fits."""
    schema = {
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date-time", "maxLength": 4}},
        "required": ["when"],
    }
    value = example_arguments(schema, random.Random(0))["when"]
    assert isinstance(value, str)
    assert len(value) <= 4


@pytest.mark.parametrize("seed", [0, 1, 17, 22])
@pytest.mark.parametrize("items", [12, 200])
@pytest.mark.parametrize("form", list(PARSERS))
def test_each_item_of_a_unique_array_of_a_format_is_one(form: str, items: int, seed: int) -> None:
    """Items of a unique array of a format each get a value of it: one draw per
    format gave way to words once the first value was taken."""
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "string", "format": form},
                "minItems": items,
                "uniqueItems": True,
            }
        },
        "required": ["items"],
    }
    values = example_arguments(schema, random.Random(seed))["items"]
    assert isinstance(values, list)
    assert len(set(values)) == len(values) >= items
    for value in values:
        PARSERS[form](value)
