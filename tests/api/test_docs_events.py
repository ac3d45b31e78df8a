"""docs/events.md: its tables name every event and stream chunk class, with its type tag and fields."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import attrs
import pytest

import retinue.providers
import retinue.session
from retinue.session import CustomEvent, EventData

DOC = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text(encoding="utf-8")

# A table row: the type tag, the class, then the fields column.
_ROW = re.compile(r"^\| `([^`]+)` \| `(\w+)` \| ([^|]*) \|", re.MULTILINE)
_ROWS = {name: (tag, fields) for tag, name, fields in _ROW.findall(DOC)}


def _field_names(kind: type) -> list[str]:
    if attrs.has(kind):
        return [field.name for field in attrs.fields(kind)]
    return list(getattr(kind, "_fields", ()))


EVENT_CLASSES = tuple(kind for kind in get_args(EventData) if kind is not CustomEvent)
CHUNK_CLASSES = get_args(retinue.providers.StreamChunk)


@pytest.mark.parametrize("kind", EVENT_CLASSES + CHUNK_CLASSES, ids=lambda kind: kind.__name__)
def test_each_class_has_its_row_with_its_tag_and_every_field(kind: type) -> None:
    """A class added, renamed or given a field cannot leave the page behind."""
    assert kind.__name__ in _ROWS, f"{kind.__name__} has no row in docs/events.md"
    tag, fields = _ROWS[kind.__name__]
    assert tag == kind.type  # type: ignore[attr-defined]
    for name in _field_names(kind):
        assert f"`{name}`" in fields, f"{kind.__name__}.{name} is not in its row"


@pytest.mark.parametrize("kind", EVENT_CLASSES + CHUNK_CLASSES, ids=lambda kind: kind.__name__)
def test_each_row_lists_the_fields_in_their_order(kind: type) -> None:
    """In the order a positional call takes them: ``ToolCallDelta(index, id, arguments_delta)``
    written from the page must not swap two of them."""
    _tag, fields = _ROWS[kind.__name__]
    places = [fields.find(f"`{name}`") for name in _field_names(kind)]
    assert places == sorted(places), f"{kind.__name__}: {fields}"


def test_every_class_the_page_names_is_public() -> None:
    """The page names only classes a user can import from where it says."""
    for name in _ROWS:
        assert hasattr(retinue.session, name) or hasattr(retinue.providers, name), name
