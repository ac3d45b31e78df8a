"""The shared store: sessions in PostgreSQL, written behind by :class:`PostgresBackend`."""

from __future__ import annotations

from typing import final

from ._postgres import PostgresBackend
from ._writebehind import BufferedStore

__all__ = ["PostgresStore"]


@final
class PostgresStore(BufferedStore):
    """Sessions in PostgreSQL, shared by many processes and machines.

    ``async with PostgresStore("postgresql://...") as store:`` group-commits
    concurrent flushes in one transaction from one worker thread. A session has
    one writer at a time (advisory lock): a second process appending to it, or
    loading it while it is attached elsewhere, gets ``SESSION_LOCKED``.
    *schema* names the PostgreSQL schema that holds the tables; with
    ``create=False`` they must exist already and opening changes nothing in the
    database (what a reader, or a role without CREATE, wants). Text is
    exchanged as UTF-8 whatever client encoding the DSN asks for; tables are
    created only in a UTF8 (or SQL_ASCII) database, one that holds any text.
    On a server in read-only mode (a hot standby, or default_transaction_read_only
    on) a store opened with ``create=False`` reads; a flush, a load (it claims
    the session) or creating the tables fails with ``READ_ONLY``. A trio deadline
    around entering the store or a load is honoured while a connection is being
    made (a server that never answers is waited for no longer), around entering it
    while another store holds the lock the tables are created under, or, with
    ``create=False``, while another transaction locks them exclusively (so is the
    store's close when it has nothing to drain: the entry is refused
    ``STORE_CLOSED``; one with sessions to drain waits for that open and drains
    through it), around a load whose read waits for another transaction's
    exclusive lock on them, and around a read that claims nothing (``list``, ``exists``,
    ``inspect``) at any point, its worker thread left to end once the server
    answers or the connection drops (closing the store ends it too). A lock on
    the store's tables held by another transaction (a ``LOCK TABLE``, a schema
    change) fails a flush with ``TABLE_LOCKED`` once its wait for the lock
    (30 s) is over: the group fails whole, once, and its events stay buffered.
    A read meeting an exclusive lock on them fails so too, after as long (an entry
    with ``create=False``, whose open reads ``retinue_meta``, among them); a
    claim waiting for a session's previous writer (a load, a new session's
    first flush), after 10 s. A session's row locked so (a hand-run
    ``SELECT ... FOR UPDATE`` or ``FOR SHARE``; not an insert into a table with a foreign
    key to ``retinue_sessions(id)``) fails that session's flush with ``SESSION_LOCKED``
    naming it after 30 s, and the rest of its group is committed then (their
    flushes waited as long). A deadline around a flush committing on its own
    (no ``async with``) ends its wait for either lock, or for a session's previous
    writer, nothing written.
    A close with sessions to drain whose entry's open it waited for fails with
    that open's error if the open waited out the lock its tables are created under,
    or the connect timeout of a server that accepts and never answers (opened again,
    it would wait as long); if the open failed otherwise (a server restarting refused
    the connection), the close opens the storage again and drains.

    Each attached session holds one advisory lock in the server's shared lock
    table, which has room for about twice max_locks_per_transaction x
    max_connections locks (12,800 measured with a default PostgreSQL 15) for
    every client of the server together.
    Past that, a claim fails with ``LOCK_TABLE_FULL``: raise
    max_locks_per_transaction on the server for more live sessions.
    """

    def __init__(self, dsn: str, *, schema: str = "public", create: bool = True) -> None:
        super().__init__(
            PostgresBackend(dsn, schema=schema, create=create),
            name=f"PostgresStore(schema={schema!r})",
        )
