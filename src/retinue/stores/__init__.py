"""Session stores: the protocol, the in-memory default and crash-tail repair."""

from __future__ import annotations

from ._memory import MemoryStore
from ._protocol import SessionStore
from ._repair import closing_events, repair_tail

__all__ = ["MemoryStore", "SessionStore", "closing_events", "repair_tail"]
