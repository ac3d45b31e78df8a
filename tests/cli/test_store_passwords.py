"""A PostgreSQL DSN's password is written nowhere, even when libpq refuses the DSN."""

from __future__ import annotations

import logging

import pytest

from retinue.cli import main

# libpq quotes what it refuses: the whole URI, or the token of a bad percent-encoding.
MALFORMED = [
    "postgresql://user:s3cret-word@[::1",
    "postgresql://user:s3cret-word%zz@localhost/db",
    "postgresql://user@localhost/db?password=s3cret-word%zz",
    # --store postgres://user:...: the URI's scheme taken as the store's, libpq gets //user:...
    "//user:s3cret-word@localhost:1/db",
]

ARGVS = [
    ["sessions", "list"],
    ["demo", "--provider", "scripted", "--no-live", "--agents", "1", "--turns", "1"],
]


@pytest.mark.parametrize("dsn", MALFORMED)
@pytest.mark.parametrize("argv", ARGVS, ids=["sessions", "demo"])
def test_a_malformed_postgres_dsn_is_reported_without_its_password(
    dsn: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The one line that reports a DSN libpq refuses hides the password it holds: libpq's message
    quotes the URI whole, or the password's badly encoded token, which would print the password."""
    assert main([*argv, "--store", f"postgres:{dsn}"]) == 1
    out, err = capsys.readouterr()
    assert "s3cret" not in out + err
    assert err.startswith(f"retinue {argv[0]}")
    assert "***" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("dsn", MALFORMED)
def test_the_verbose_demo_logs_a_refused_dsn_without_its_password(
    dsn: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """``retinue -v demo`` logs the failure's traceback with the password hidden: the
    messages of libpq's error and of the store's, each quoting the DSN, printed it."""
    caplog.set_level(logging.WARNING, logger="retinue.cli")
    assert main(["-v", *ARGVS[1], "--store", f"postgres:{dsn}"]) == 1
    assert "retinue demo failed" in caplog.text
    assert "Traceback" in caplog.text
    assert "s3cret" not in caplog.text + "".join(capsys.readouterr())
