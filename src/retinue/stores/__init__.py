"""Session stores: the protocol, write-behind with group commit, and the backends.

``MemoryStore`` (default), ``SQLiteStore(path)`` (embedded, durable),
``JSONLStore(dir)`` (one JSONL file per session) and ``PostgresStore(dsn)``
(many processes) all pass one conformance suite. Each is a ``BufferedStore``
over a ``StorageBackend``; another backend plugs in the same way.
"""

from __future__ import annotations

from retinue._errors import StoreTimeoutError

from ._backend import AppendBatch, Listing, SkippedSession, StorageBackend, StoredLog
from ._ids import check_session_id
from ._jsonl import JSONLStore
from ._memory import MemoryStore
from ._pgstore import PostgresStore
from ._protocol import SessionStore
from ._records import StoreStatistics
from ._repair import closing_events, repair_tail
from ._sqlite import SQLiteStore
from ._writebehind import BufferedStore

__all__ = [
    "AppendBatch",
    "BufferedStore",
    "JSONLStore",
    "Listing",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "SessionStore",
    "SkippedSession",
    "StorageBackend",
    "StoreStatistics",
    "StoreTimeoutError",
    "StoredLog",
    "check_session_id",
    "closing_events",
    "repair_tail",
]
