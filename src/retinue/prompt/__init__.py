"""System-prompt sections and strict variable rendering."""

from __future__ import annotations

from ._sections import (
    Assembly,
    PromptError,
    Section,
    check_template,
    is_variable_name,
    render,
)

__all__ = ["Assembly", "PromptError", "Section", "check_template", "is_variable_name", "render"]
