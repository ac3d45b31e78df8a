"""Running ``retinue sessions`` and the stores it reads, for the sessions command tests."""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
from pathlib import Path

from retinue.cli._sessions import add_parser
from retinue.session import Session
from retinue.stores import JSONLStore, SQLiteStore
from tests.stores._kit import open_tool_turn, run_turn


def cli(*argv: str) -> int:
    """Run ``retinue sessions`` with *argv*; its exit status."""
    parser = argparse.ArgumentParser(prog="retinue")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sessions", *argv])
    return int(args.handler(args))


async def fill_sqlite(path: Path) -> tuple[Session, Session]:
    """Store a finished session and one that crashed mid-turn in a SQLite store at *path*."""
    done, crashed = Session.create("done", cwd="/srv/app"), Session.create("crashed")
    async with SQLiteStore(path) as store:
        for session in (done, crashed):
            store.attach_new(session)
            run_turn(session, "what is the weather?")
        open_tool_turn(crashed)
        await store.flush(done)
        await store.flush(crashed)
    return done, crashed


async def fill_jsonl(root: Path) -> Session:
    """Store a session that crashed mid-turn in a JSONL store at *root*."""
    crashed = Session.create("crashed")
    async with JSONLStore(root) as store:
        store.attach_new(crashed)
        run_turn(crashed, "what is the weather?")
        open_tool_turn(crashed)
        await store.flush(crashed)
    return crashed


def damage_sqlite_header(path: Path, session_id: str, header: str) -> None:
    """Overwrite the stored header of *session_id* in the SQLite store at *path* with *header*."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE sessions SET header = ? WHERE id = ?", (header, session_id))
