"""PostgresStore's lock connection asks for TCP keepalives, each unless its DSN sets its own."""

from __future__ import annotations

from typing import Any

import pytest

from retinue.stores._pgclaims import SessionClaims
from retinue.stores._pgreaders import ReaderPool

pytest.importorskip("psycopg")


def _asked(dsn: str) -> dict[str, Any]:
    """The libpq parameters a lock connection of a store on *dsn* is made with."""
    asked: list[dict[str, Any]] = []

    def connect(**params: Any) -> object:
        asked.append(params)
        return object()

    claims = SessionClaims("s", dsn, connect, ReaderPool("s", connect))  # type: ignore[arg-type]
    claims._connect_locker()
    (params,) = asked
    return {name: value for name, value in params.items() if name.startswith("keepalives")}


def test_the_lock_connection_notices_a_server_gone_within_about_a_minute() -> None:
    assert _asked("postgresql://u@h/db") == {
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
    }


def test_the_keepalives_a_dsn_sets_hold_for_the_lock_connection() -> None:
    assert _asked("postgresql://u@h/db?keepalives=0&keepalives_idle=5") == {
        "keepalives_interval": 10,
        "keepalives_count": 3,
    }
    assert _asked("host=h dbname=db keepalives_count=9") == {
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
    }
