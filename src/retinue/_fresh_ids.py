"""Fresh agent ids: ``<label>-session-<uuid4>``, the name given labelling a new id (R13.3)."""

from __future__ import annotations

import uuid

__all__ = ["FRESH_SUFFIX_SAMPLE", "fresh_id", "label_of"]

_SEPARATOR = "-session-"
_UUID_LENGTH = len(str(uuid.UUID(int=0)))
FRESH_SUFFIX_SAMPLE = f"{_SEPARATOR}{uuid.UUID(int=0)}"
"""What a fresh id adds to its label, of its length and alphabet: a store must take the whole."""


def fresh_id(label: str) -> str:
    """A new id labelled *label*."""
    return f"{label}{_SEPARATOR}{uuid.uuid4()}"


def label_of(agent_id: str) -> str | None:
    """The label of *agent_id* if it has a fresh id's shape, else ``None``."""
    label, separator, suffix = agent_id.rpartition(_SEPARATOR)
    return label if separator and label and len(suffix) == _UUID_LENGTH else None
