"""Content blocks check their own fields when built (R1.1)."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from retinue._content import (
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
    as_content,
)


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: Text(3), "Text.text must be a str"),  # type: ignore[arg-type]
        (lambda: Text(None), "Text.text must be a str"),  # type: ignore[arg-type]
        (lambda: Reasoning("x", 5), "Reasoning.signature must be a str or None"),  # type: ignore[arg-type]
        (lambda: RedactedReasoning(b"x"), "RedactedReasoning.data must be a str"),  # type: ignore[arg-type]
        (lambda: ToolCall("c", None, "{}"), "ToolCall.name must be a str"),  # type: ignore[arg-type]
        (lambda: ToolResultBlock("c", [Text("x")]), "ToolResultBlock.content must be a tuple"),  # type: ignore[arg-type]
        (lambda: ToolResultBlock("c", ("x",)), "ToolResultBlock.content must be a tuple"),  # type: ignore[arg-type]
        (lambda: ToolResultBlock("c", (), is_error=1), "ToolResultBlock.is_error must be a bool"),  # type: ignore[arg-type]
    ],
)
def test_a_block_refuses_a_field_its_stored_form_could_not_load(build: Any, named: str) -> None:
    """R1.1, R4.5: a block with a field of the wrong type is refused when built, never logged."""
    with pytest.raises(TypeError, match=named):
        build()


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (123, "int"),
        (None, "NoneType"),
        ({"type": "text", "text": "hi"}, "dict"),
        (b"hi", "bytes"),
        (bytearray(b"hi"), "bytearray"),
        ({Text("a")}, "set"),
    ],
    ids=["int", "None", "dict", "bytes", "bytearray", "set"],
)
def test_content_of_another_kind_is_refused_saying_what_content_is(
    content: object, named: str
) -> None:
    """R1.1, R1.2: content is a str, a block or a sequence of blocks; anything else is
    refused naming its type, before it is walked (a dict's keys, bytes' ints, a set's
    arbitrary order); an ordered iterable such as a generator is content."""
    expected = (
        "content must be a str, a content block or a sequence of content blocks, got " + named
    )
    with pytest.raises(TypeError) as refused:
        as_content(content)  # type: ignore[arg-type]
    assert str(refused.value) == expected


@pytest.mark.parametrize(
    "content",
    [
        "a",
        Text("a"),
        (Text("a"),),
        [Text("a")],
        collections.deque([Text("a")]),
        collections.UserList([Text("a")]),
        (block for block in [Text("a")]),
    ],
    ids=["str", "block", "tuple", "list", "deque", "UserList", "generator"],
)
def test_a_str_a_block_or_any_sequence_of_blocks_is_content(content: Any) -> None:
    """R1.2: the documented kinds of content all normalise to a tuple of blocks."""
    assert as_content(content) == (Text("a"),)


class _Loud(Text):  # type: ignore[misc]  # the runtime subclass under test
    pass


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (_Loud("a"), "content"),
        ((Text("a"), _Loud("b")), "content[1]"),
        ([_Loud("a")], "content[0]"),
    ],
    ids=["block", "tuple", "list"],
)
def test_a_block_of_a_runtime_subclass_is_refused_naming_it(content: Any, where: str) -> None:
    """R1.1, R1.6: block classes are final; an instance of a subclass is refused where
    content is taken, since the log would reload it as the base class."""
    with pytest.raises(TypeError) as refused:
        as_content(content)
    assert str(refused.value) == (
        f"{where} is an instance of _Loud, a subclass of Text: "
        "block classes are final, build a Text"
    )
