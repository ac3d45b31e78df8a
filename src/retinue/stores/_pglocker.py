"""The lock connection of PostgreSQL session claims: how one is made, set up and its
backend known, and how the backend of a dropped one is ended."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, TypeAlias

from ._pgschema import psycopg_module

if TYPE_CHECKING:
    import psycopg

__all__ = ["Backend", "end_backend", "keepalives", "set_up_locker"]

Backend: TypeAlias = tuple[int, object]
"""A connection's backend: its pid and start (a pid alone can be reused)."""

_END_TIMEOUT_MS = 5_000
"""How long a remade lock connection waits for the backend of the dropped one to end."""
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
"""libpq TCP keepalives of the lock connection: a server gone from the network (a cut, a host
down) is noticed within about a minute (30 s idle, then 3 probes 10 s apart), where the system's
default waits over two hours. Each applies unless the DSN sets it: the DSN's own settings hold."""


def keepalives(dsn: str) -> dict[str, int]:
    """The TCP keepalive settings a lock connection to *dsn* is made with: those it sets not."""
    given = psycopg_module().conninfo.conninfo_to_dict(dsn)
    return {name: value for name, value in _KEEPALIVES.items() if name not in given}


def set_up_locker(conn: psycopg.Connection[Any]) -> Backend | None:
    """Set up a new lock connection; its backend.

    The server's idle timeouts, set for the role, the database or in the DSN,
    would end it while no session is written, every claim with it: its session
    turns them off (any user may; ``idle_session_timeout`` is PostgreSQL 14's)."""
    if conn.info.server_version >= 140000:
        conn.execute("SET idle_session_timeout = 0")
    conn.execute("SET idle_in_transaction_session_timeout = 0")
    row = conn.execute(
        "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
    ).fetchone()
    return (row[0], row[1]) if row else None


def end_backend(conn: psycopg.Connection[Any], backend: Backend) -> None:
    """End the dropped lock connection's *backend*, through *conn*, if the server still runs it.

    A connection cut between client and server (say, a load balancer's idle
    timeout) can leave its backend running, holding this store's locks,
    until the server's TCP keepalive notices: hours by default, all that
    time this store's own sessions refused as locked. The backend is this
    store's, so ending it takes no lock from another writer. Without the
    privilege to end it (or before PostgreSQL 14) the locks wait for the server.
    """
    with contextlib.suppress(psycopg_module().Error):
        conn.execute(
            "SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
            "WHERE pid = %s AND backend_start = %s",
            (_END_TIMEOUT_MS, *backend),
        )
