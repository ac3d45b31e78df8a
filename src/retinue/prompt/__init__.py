"""System-prompt sections and strict variable rendering."""

from __future__ import annotations

from ._sections import PromptError, Section, render

__all__ = ["PromptError", "Section", "render"]
