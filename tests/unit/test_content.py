"""Content blocks check their own fields when built (R1.1)."""

from __future__ import annotations

from typing import Any

import pytest

from retinue._content import Reasoning, RedactedReasoning, Text, ToolCall, ToolResultBlock


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
