"""System-prompt sections and strict variable rendering."""

from __future__ import annotations

from ._sections import Assembly, PromptError, Section, render

__all__ = ["Assembly", "PromptError", "Section", "render"]
