"""Fresh agent ids: ``<label>-session-<uuid4>``, the name given labelling a new id (R13.3)."""

from __future__ import annotations

import re
import uuid

__all__ = ["FRESH_SUFFIX_SAMPLE", "fresh_id", "label_of"]

_SEPARATOR = "-session-"
# As str(uuid.uuid4()) writes one: lower-case hex, the version digit 4.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
FRESH_SUFFIX_SAMPLE = f"{_SEPARATOR}{uuid.UUID(int=0)}"
"""What a fresh id adds to its label, of its length and alphabet: a store must take the whole."""


def fresh_id(label: str) -> str:
    """A new id labelled *label*."""
    return f"{label}{_SEPARATOR}{uuid.uuid4()}"


def label_of(agent_id: str) -> str | None:
    """The label of *agent_id* if it has a fresh id's shape (a uuid4's text after the last
    ``-session-``), else ``None``."""
    label, separator, suffix = agent_id.rpartition(_SEPARATOR)
    if not (separator and label and _UUID.fullmatch(suffix)):
        return None
    return label
