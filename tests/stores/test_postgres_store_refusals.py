"""A PostgreSQL store refuses what it cannot read as its store, typed and named: a DSN libpq
cannot parse, when the store is made (quoting none of it)."""

from __future__ import annotations

import pytest

from retinue import ConfigError
from retinue.stores import PostgresStore


@pytest.mark.parametrize(
    ("dsn", "fault"),
    [
        ("notadsn", 'missing "=" after "***" in connection info string'),
        ("host=h password=se cret", 'missing "=" after "***" in connection info string'),
        ("postgresql://u:se cret@h/x", 'unexpected spaces found in "***", use percent-encoded'),
    ],
    ids=["no-key", "spaced-password", "spaced-uri"],
)
@pytest.mark.parametrize("create", [True, False])
def test_a_dsn_libpq_cannot_parse_is_refused_when_the_store_is_made(
    dsn: str, fault: str, *, create: bool
) -> None:
    """R11.12: ``ConfigError`` coded ``INVALID_STORE_PATH`` naming the PostgreSQL store and
    libpq's fault, with no fragment of the DSN (a password's part, say) quoted."""
    with pytest.raises(ConfigError) as caught:
        PostgresStore(dsn, create=create)
    assert caught.value.code == "INVALID_STORE_PATH"
    assert caught.value.message.startswith(
        f"PostgresStore dsn is no libpq connection string or URI: {fault}"
    )
    assert "cret" not in caught.value.message
