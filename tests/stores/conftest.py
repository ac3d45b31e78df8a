"""Store fixtures: one factory per backend, each able to reopen the same storage."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from retinue.session import SessionHeader
from retinue.stores import JSONLStore, PostgresStore, SQLiteStore
from retinue.stores._ids import bucket_name, escape_id
from retinue.stores._memory import MemoryBackend
from retinue.stores._writebehind import BufferedStore

STORE_KINDS = ["memory", "sqlite", "jsonl", "postgres"]
TEARING_KINDS = ["jsonl"]
"""Backends whose writes a crash can leave part-stored: a load repairs their torn tail (R11.8)."""
TRANSACTIONAL_KINDS = ["sqlite", "postgres"]
"""Backends of stored records that commit each write whole: they never hold a torn tail."""
POSTGRES_ENV = "RETINUE_TEST_POSTGRES_DSN"

HERE = Path(__file__).resolve().parent
STORE_TEST_TIMEOUT = 120
"""Real seconds a store test may take: they run on the real clock (worker threads, child
processes, a PostgreSQL server), so a hang is bounded here rather than by the global 600 s.
The slowest (1100 JSONL sessions in a child process) takes 3-10 s."""
CRASH_TEST_TIMEOUT = 600
"""The crash suite's own longer bound: each test SIGKILLs real processes for about 100 s."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Bound every store test without a ``timeout`` marker of its own in real time."""
    for item in items:
        if not item.path.is_relative_to(HERE) or item.get_closest_marker("timeout"):
            continue  # this hook sees the whole session's items, not only this directory's
        crash = item.get_closest_marker("crash") is not None
        item.add_marker(pytest.mark.timeout(CRASH_TEST_TIMEOUT if crash else STORE_TEST_TIMEOUT))


def postgres_dsn() -> str:
    """The test server's DSN; skip (fail under CI) when there is none."""
    dsn = os.environ.get(POSTGRES_ENV)
    if dsn:
        return dsn
    reason = f'{POSTGRES_ENV} is not set; start a server with: pg=$(bash scripts/postgres.sh) && eval "$pg"'
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _unsupported(*args: object) -> Any:
    raise NotImplementedError("the memory backend stores event objects, not records")


@attrs.define
class StoreKit:
    """Opens stores of one kind over the same storage, and tampers with stored records."""

    kind: str
    open: Callable[[], BufferedStore]
    tamper: Callable[[str, int, str | None], None]
    """``tamper(session_id, index, text)``: replace event record *index* (``None`` deletes it)."""
    append_raw: Callable[[str, str], None]
    """Append a raw fragment after the stored records (a torn tail)."""
    record_count: Callable[[str], int]
    """How many event records are physically stored."""
    tamper_header: Callable[[str, str], None] = attrs.field(default=None)
    """Replace the stored header text of a session."""
    records: Callable[[str], list[str]] = attrs.field(default=_unsupported)
    """The event records physically stored, in storage order."""


def _memory_kit() -> StoreKit:
    backend = MemoryBackend()
    return StoreKit(
        "memory",
        lambda: BufferedStore(backend, name="MemoryStore"),
        _unsupported,
        _unsupported,
        _unsupported,
    )


def _sqlite_kit(path: Path) -> StoreKit:
    def run(sql: str, *args: object) -> list[tuple[object, ...]]:
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:
            return conn.execute(sql, args).fetchall()

    def sid(session_id: str) -> object:
        return run("SELECT sid FROM sessions WHERE id = ?", session_id)[0][0]

    def segments(session_id: str) -> list[tuple[int, list[str]]]:
        rows = run(
            "SELECT first_seq, body FROM segments WHERE sid = ? ORDER BY first_seq", sid(session_id)
        )
        return [(int(first), str(body).split("\n")) for first, body in rows]  # type: ignore[call-overload]

    def tamper(session_id: str, index: int, text: str | None) -> None:
        for first, lines in segments(session_id):
            if first <= index < first + len(lines):
                if text is None:
                    del lines[index - first]
                else:
                    lines[index - first] = text
                body = "\n".join(lines)
                run(
                    "UPDATE segments SET body = ? WHERE sid = ? AND first_seq = ?",
                    body,
                    sid(session_id),
                    first,
                )

    def append_raw(session_id: str, text: str) -> None:
        first = sum(len(lines) for _, lines in segments(session_id))
        run("INSERT INTO segments VALUES (?, ?, 1, ?)", sid(session_id), first, text)
        run("UPDATE sessions SET next_seq = ? WHERE sid = ?", first + 1, sid(session_id))

    def count(session_id: str) -> int:
        return sum(len(lines) for _, lines in segments(session_id))

    def tamper_header(session_id: str, text: str) -> None:
        run("UPDATE sessions SET header = ? WHERE id = ?", text, session_id)

    def records(session_id: str) -> list[str]:
        return [line for _, lines in segments(session_id) for line in lines]

    return StoreKit(
        "sqlite", lambda: SQLiteStore(path), tamper, append_raw, count, tamper_header, records
    )


def jsonl_file(root: Path, session_id: str) -> Path:
    """The file of a session stored without a cwd."""
    return root / bucket_name(None) / f"{escape_id(session_id)}.jsonl"


def _jsonl_kit(root: Path) -> StoreKit:
    def tamper(session_id: str, index: int, text: str | None) -> None:
        path = jsonl_file(root, session_id)
        lines = path.read_bytes().split(b"\n")
        if text is None:
            del lines[index + 1]
        else:
            lines[index + 1] = text.encode()
        path.write_bytes(b"\n".join(lines))

    def append_raw(session_id: str, text: str) -> None:
        with jsonl_file(root, session_id).open("ab") as file:
            file.write(text.encode())

    def count(session_id: str) -> int:
        return jsonl_file(root, session_id).read_bytes().count(b"\n") - 1

    def tamper_header(session_id: str, text: str) -> None:
        path = jsonl_file(root, session_id)
        lines = path.read_bytes().split(b"\n")
        lines[0] = text.encode()
        path.write_bytes(b"\n".join(lines))

    def records(session_id: str) -> list[str]:
        text = jsonl_file(root, session_id).read_text(errors="replace")
        return text.removesuffix("\n").split("\n")[1:]

    return StoreKit(
        "jsonl", lambda: JSONLStore(root), tamper, append_raw, count, tamper_header, records
    )


def _postgres_kit(dsn: str, schema: str) -> StoreKit:
    import psycopg

    def run(sql: str, *args: object) -> list[tuple[object, ...]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cursor = conn.execute(sql.replace("{s}", schema), args)
            return cursor.fetchall() if cursor.description else []

    def segments(session_id: str) -> list[tuple[int, list[str]]]:
        rows = run(
            "SELECT first_seq, body FROM {s}.retinue_segments WHERE session_id = %s ORDER BY first_seq",
            session_id,
        )
        return [(int(first), str(body).split("\n")) for first, body in rows]  # type: ignore[call-overload]

    def tamper(session_id: str, index: int, text: str | None) -> None:
        for first, lines in segments(session_id):
            if first <= index < first + len(lines):
                if text is None:
                    del lines[index - first]
                else:
                    lines[index - first] = text
                run(
                    "UPDATE {s}.retinue_segments SET body = %s WHERE session_id = %s AND first_seq = %s",
                    "\n".join(lines),
                    session_id,
                    first,
                )

    def append_raw(session_id: str, text: str) -> None:
        first = sum(len(lines) for _, lines in segments(session_id))
        run("INSERT INTO {s}.retinue_segments VALUES (%s, %s, 1, %s)", session_id, first, text)
        run("UPDATE {s}.retinue_sessions SET next_seq = %s WHERE id = %s", first + 1, session_id)

    def count(session_id: str) -> int:
        return sum(len(lines) for _, lines in segments(session_id))

    def tamper_header(session_id: str, text: str) -> None:
        run("UPDATE {s}.retinue_sessions SET header = %s WHERE id = %s", text, session_id)

    def records(session_id: str) -> list[str]:
        return [line for _, lines in segments(session_id) for line in lines]

    return StoreKit(
        "postgres",
        lambda: PostgresStore(dsn, schema=schema),
        tamper,
        append_raw,
        count,
        tamper_header,
        records,
    )


@pytest.fixture
def postgres_schema() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL schema for one test, dropped afterwards."""
    dsn = postgres_dsn()
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield dsn, schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    """A store kit for each backend."""
    return _kit(request.param, request, tmp_path)


@pytest.fixture(params=STORE_KINDS[1:])
def record_kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    """A store kit for each backend that stores events as records one can tamper with."""
    return _kit(request.param, request, tmp_path)


@pytest.fixture(params=STORE_KINDS[1:])
def blocking_kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    """A store kit for each backend whose writes block, run in a worker thread."""
    return _kit(request.param, request, tmp_path)


@pytest.fixture(params=TEARING_KINDS)
def tearing_kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    """A store kit for each backend whose writes can tear."""
    return _kit(request.param, request, tmp_path)


@pytest.fixture(params=TRANSACTIONAL_KINDS)
def transactional_kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    """A store kit for each backend of stored records that commits each write whole."""
    return _kit(request.param, request, tmp_path)


def _kit(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    if kind == "memory":
        return _memory_kit()
    if kind == "sqlite":
        return _sqlite_kit(tmp_path / "sessions.db")
    if kind == "jsonl":
        return _jsonl_kit(tmp_path / "sessions")
    dsn, schema = request.getfixturevalue("postgres_schema")
    return _postgres_kit(dsn, schema)


def header(session_id: str, **fields: object) -> SessionHeader:
    """A session header with a fixed creation time."""
    return SessionHeader(id=session_id, created_at=1_700_000_000_000, **fields)  # type: ignore[arg-type]
