"""A store the command cannot use is named in the one line that reports it."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from retinue import StoreError
from retinue.cli import main
from retinue.cli._demo_hint import without_password
from retinue.cli._sessions import store_problem
from tests.stores.conftest import postgres_dsn


def test_sessions_names_a_sqlite_store_it_cannot_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory given as the database: the failure says which path, and that it is a
    directory, not only that SQLite could not open a database file."""
    assert main(["sessions", "list", "--store", f"sqlite:{tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue sessions list: opening SQLiteStore('{tmp_path}'): ")
    assert "is a directory, not a database file" in err
    assert err.count("\n") == 1


def test_demo_says_a_directory_given_as_the_sqlite_file_is_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo, which creates the database, reports the same directory the same way."""
    argv = ["demo", "--provider", "scripted", "--no-live", "--agents", "1", "--turns", "1"]
    assert main([*argv, "--store", f"sqlite:{tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue demo: opening SQLiteStore('{tmp_path}'): ")
    assert "is a directory, not a database file" in err
    assert err.count("\n") == 1


def test_the_demo_names_the_missing_directory_of_its_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database file in a directory that does not exist: the line names that directory,
    not only that SQLite could not open a database file."""
    missing = tmp_path / "absent"
    argv = ["demo", "--provider", "scripted", "--no-live", "--agents", "1", "--turns", "1"]
    assert main([*argv, "--store", f"sqlite:{missing / 'sessions.db'}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue demo: opening SQLiteStore('{missing / 'sessions.db'}'): ")
    assert f"no such directory for the database file: '{missing}'" in err
    assert err.count("\n") == 1


def test_demo_says_a_file_given_as_the_jsonl_directory_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file given as the JSONL directory: the demo's one line names it and what is wrong."""
    occupied = tmp_path / "taken"
    occupied.write_text("notes\n")
    argv = ["demo", "--provider", "scripted", "--no-live", "--agents", "1", "--turns", "1"]
    assert main([*argv, "--store", f"jsonl:{occupied}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue demo: opening JSONLStore('{occupied}'): ")
    assert "not a directory" in err
    assert err.count("\n") == 1


def test_sessions_says_a_file_given_as_the_jsonl_directory_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sessions commands report the same file the same way, not as "File exists"."""
    occupied = tmp_path / "taken"
    occupied.write_text("notes\n")
    assert main(["sessions", "list", "--store", f"jsonl:{occupied}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue sessions list: opening JSONLStore('{occupied}'): ")
    assert "not a directory" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("postgres:postgresql://user:secret@db/retinue", StoreError("down", code="STORAGE_ERROR")),
        ("sqlite:s.db", StoreError("session 'x' is not stored", code="NOT_FOUND")),
        ("sqlite:s.db", OSError("disk full")),
        ("memory", StoreError("down", code="STORAGE_ERROR")),
    ],
)
def test_store_problem_names_only_a_file_store_whose_storage_failed(
    spec: str, error: BaseException
) -> None:
    """A DSN (which may hold a password) is never echoed; other errors name their own subject."""
    assert store_problem(spec, error) == str(error)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:secret-word@db:5432/x", "user=u password=*** dbname=x host=db port=5432"),
        ("host=db user=u password=secret-word", "user=u password=*** host=db"),
        ("postgresql://u@db/x", "postgresql://u@db/x"),
    ],
)
def test_the_demo_hint_hides_a_postgres_password(dsn: str, shown: str) -> None:
    """The closing hint names a PostgreSQL store without the password its DSN holds."""
    assert without_password(f"postgres:{dsn}") == f"postgres:{shown}"
    assert without_password("sqlite:secret-word.db") == "sqlite:secret-word.db"


@pytest.mark.postgres
def test_the_demo_never_prints_the_password_of_its_postgres_store(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A demo run on a DSN holding a password prints it nowhere, though it names the store."""
    dsn = make_conninfo(postgres_dsn(), password="secret-word")
    argv = ["demo", "--provider", "scripted", "--no-live", "--agents", "1", "--turns", "1"]
    assert main([*argv, "--store", f"postgres:{dsn}"]) == 0
    out, err = capsys.readouterr()
    assert "secret-word" not in out + err
    assert "password=***" in out


BLANK_LOCATIONS = ["jsonl:", "jsonl: ", "sqlite: ", "sqlite:\t", "sqlite: \n", "postgres:  "]
"""Store values whose location is empty or only whitespace: a shell's quoting gone wrong."""


@pytest.mark.parametrize("spec", BLANK_LOCATIONS)
def test_the_demo_refuses_a_store_location_of_only_whitespace(
    spec: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A location of only whitespace is a usage error, as an empty one is, not taken as a file or
    directory named by blanks, created in the working directory."""
    monkeypatch.chdir(tmp_path)
    argv = ["demo", "--provider", "scripted", "--no-live", "--agents", "1", "--turns", "1"]
    with pytest.raises(SystemExit) as caught:
        main([*argv, "--store", spec])
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"argument --store: invalid store {spec!r}: "
        "use sqlite:PATH, jsonl:DIR, postgres:DSN or memory\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["list"], ["show", "s1"], ["import", "in.jsonl"]])
@pytest.mark.parametrize("spec", BLANK_LOCATIONS)
def test_the_sessions_commands_refuse_a_store_location_of_only_whitespace(
    spec: str,
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The sessions commands refuse it in the same words and as the same usage error (status
    2), the reading ones instead of reporting no store there, ``import`` instead of creating
    one there."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.jsonl").write_text("")
    with pytest.raises(SystemExit) as caught:
        main(["sessions", *command, "--store", spec])
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"retinue sessions {command[0]}: error: argument --store: invalid store {spec!r}: "
        "use sqlite:PATH, jsonl:DIR or postgres:DSN\n"
    )
    assert [path.name for path in tmp_path.iterdir()] == ["in.jsonl"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["sessions", "list"], "retinue sessions list"),
        (["demo", "--no-live", "--provider", "scripted", "--agents", "1"], "retinue demo"),
    ],
    ids=["sessions", "demo"],
)
def test_a_postgres_server_that_cannot_be_reached_is_reported_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    """A server's message of several lines (libpq's hint on a line of its own) is given on the one
    line of the failure, the hint not on a second line indented with a tab."""
    no_server = tmp_path / "no-server"  # a socket directory no server listens in
    assert main([*argv, "--store", f"postgres:host={no_server} connect_timeout=5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{named}: opening PostgresStore(schema='public'): ")
    assert str(no_server) in err
    assert err.count("\n") == 1
    assert "\t" not in err


def test_the_sessions_commands_refuse_a_store_path_holding_a_nul_as_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A store path no file can have is refused while the command line is parsed, status 2 and the
    usage, as the demo refuses it, not reported as the command failing."""
    with pytest.raises(SystemExit) as caught:
        main(["sessions", "list", "--store", "sqlite:runs/a\0b.db"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        "retinue sessions list: error: argument --store: "
        "sqlite store path 'runs/a\\x00b.db' contains a NUL character, "
        "which no file name can hold\n"
    )
