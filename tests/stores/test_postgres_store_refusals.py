"""A PostgreSQL store refuses what it cannot read as its store, typed and named: a DSN libpq
cannot parse, when the store is made (quoting none of it), and tables whose schema version row
was deleted, on a reading open and a writing one alike (none written back over them)."""

from __future__ import annotations

import pytest

from retinue import ConfigError
from retinue._errors import StoreError
from retinue.stores import PostgresStore


@pytest.mark.parametrize(
    ("dsn", "fault"),
    [
        ("notadsn", 'missing "=" after "***" in connection info string'),
        ("host=h password=se cret", 'missing "=" after "***" in connection info string'),
        ("postgresql://u:se cret@h/x", 'unexpected spaces found in "***", use percent-encoded'),
        (
            'postgresql://u:se"cret pass@h/x',
            'unexpected spaces found in "***", use percent-encoded',
        ),
        (
            "postgresql://u:secret@[::1/x",
            (
                'end of string reached when looking for matching "]" in IPv6 host address in'
                ' URI: "***"'
            ),
        ),
    ],
    ids=["no-key", "spaced-password", "spaced-uri", "quoted-password", "unclosed-bracket"],
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


@pytest.mark.parametrize("create", [False, True])
async def test_tables_without_their_schema_version_are_refused_and_left_so(
    postgres_schema: tuple[str, str], *, create: bool
) -> None:
    """A ``retinue_meta`` whose version row was deleted is refused ``UNSUPPORTED_SCHEMA``
    saying so, not as "version None", and a writing open does not write the row back."""
    import psycopg

    dsn, schema = postgres_schema
    async with PostgresStore(dsn, schema=schema):
        pass
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{schema}".retinue_meta')  # type: ignore[arg-type]
    with pytest.raises(StoreError) as caught:
        async with PostgresStore(dsn, schema=schema, create=create):
            pass
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    assert caught.value.message == (
        f"schema {schema!r} holds retinue tables but no schema version (retinue_meta has no "
        "'schema_version' row); this retinue reads 1 and writes no version over tables it "
        "did not create"
    )
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT * FROM "{schema}".retinue_meta').fetchall()  # type: ignore[arg-type]
    assert rows == []


def test_a_dsn_utf8_cannot_encode_is_refused_typed() -> None:
    """R11.12: a DSN holding a stray byte (as a shell's argument decodes one) is refused
    ``INVALID_STORE_PATH``, where a bare ``UnicodeEncodeError`` escaped the store."""
    with pytest.raises(ConfigError) as caught:
        PostgresStore("postgresql://u:pw\udcff@h/x")
    assert caught.value.code == "INVALID_STORE_PATH"
    assert "pw" not in caught.value.message
