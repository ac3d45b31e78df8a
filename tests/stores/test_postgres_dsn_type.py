"""PostgresStore refuses a DSN that is not a str when built, as SQLiteStore refuses such a path."""

from __future__ import annotations

from typing import Any

import pytest

from retinue.stores import PostgresStore


@pytest.mark.parametrize(
    "dsn", [42, b"postgresql://user:secret@host/db", None], ids=["int", "bytes", "none"]
)
def test_postgres_store_refuses_a_dsn_that_is_not_a_str_when_built(dsn: Any) -> None:
    """A DSN of another type was taken, and the open failed later, STORAGE_ERROR wrapping an
    AttributeError; now the store is refused at once with a TypeError naming the parameter
    and the type, never the value (a DSN may hold a password)."""
    with pytest.raises(TypeError) as caught:
        PostgresStore(dsn)
    message = str(caught.value)
    assert message == (
        "PostgresStore dsn must be a str (a libpq connection string or URI), "
        f"not {type(dsn).__name__}"
    )
    assert "secret" not in message
