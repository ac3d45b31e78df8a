"""``retinue sessions``: list, show, export, import, replay and delete stored session logs."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from retinue._errors import ConfigError, RetinueError, StoreError, describe_error
from retinue.session import Session, TurnStart
from retinue.stores import JSONLStore, PostgresStore, SQLiteStore
from retinue.stores._common import refuse_unnamable
from retinue.stores._writebehind import BufferedStore

from ._describe import describe, torn_tail, when
from ._export_file import write_output
from ._import_file import STANDARD_STREAM, read_import
from ._jsonl import read_jsonl, to_jsonl
from ._output import complain, discard_stdout, printable
from ._overwrite import refuse_store_overwrite
from ._passwords import without_passwords

__all__ = [
    "STORE_FORMS",
    "add_parser",
    "describe",
    "open_store",
    "parse_store_spec",
    "read_jsonl",
    "run",
    "store_problem",
    "to_jsonl",
]

DEFAULT_STORE = "sqlite:retinue.db"


STORE_FORMS = "sqlite:PATH, jsonl:DIR or postgres:DSN"
"""The ``--store`` values the ``sessions`` commands take, as their errors list them."""


def parse_store_spec(spec: str, *, forms: str = STORE_FORMS) -> tuple[str, str]:
    """Split ``sqlite:PATH``, ``jsonl:DIR`` or ``postgres:DSN`` into kind and location.

    *forms* lists the values the error offers instead, for a command that
    takes more than the stores this opens. A file store's ``~`` is the home
    directory: the shell leaves ``sqlite:~/s.db`` as typed (``~`` opens no word).

    Raises:
        argparse.ArgumentTypeError: the spec has no location (or only whitespace, a
            shell's quoting gone wrong) or an unknown kind.
        ConfigError: ``INVALID_STORE_PATH``: a file store's path holds a NUL
            character, which the store would refuse.
    """
    kind, separator, location = spec.partition(":")
    if not separator or not location.strip():
        raise argparse.ArgumentTypeError(f"invalid store {spec!r}: use {forms}")
    if kind not in _STORES:
        raise argparse.ArgumentTypeError(f"unknown store kind {kind!r}: use {forms}")
    if kind in _FILE_STORES:
        refuse_unnamable(location, what=f"{kind} store path")
        location = os.path.expanduser(location)
    return kind, location


def open_store(spec: str, *, create: bool = True) -> BufferedStore:
    """Build a store from ``sqlite:PATH``, ``jsonl:DIR`` or ``postgres:DSN``.

    With ``create=False`` a SQLite file opens only if it already is a retinue
    store, and is left as it is (no schema written, no journal mode changed);
    a JSONL directory keeps the files crashed writers left in it; a
    PostgreSQL schema must already hold the tables, and nothing is written.
    """
    kind, location = parse_store_spec(spec)
    if kind == "sqlite":
        return SQLiteStore(location, create=create)
    if kind == "postgres":
        return PostgresStore(location, create=create)
    return JSONLStore(location, create=create)


_FILE_STORES = frozenset({"sqlite", "jsonl"})
_STORES = ("sqlite", "jsonl", "postgres")


def store_problem(spec: str, error: BaseException) -> str:
    """Describe *error*, naming the store's file or directory when its storage failed.

    A storage failure names what the store was doing, not where, but for a
    failed open, which names the store (its file or directory). A PostgreSQL
    error names its server itself, and its DSN may hold a password, so only
    file stores are named, and a DSN's password is hidden wherever the message
    quotes it (libpq quotes a URI it refuses whole). Given on one line: a
    server's message may take several (libpq adds a hint on its own line).
    """
    message = " ".join(line.strip() for line in describe_error(error).splitlines() if line.strip())
    kind, _, location = spec.partition(":")
    if kind == "postgres":
        message = without_passwords(message, location)
    if (
        isinstance(error, StoreError)
        and error.code == "STORAGE_ERROR"
        and kind in _FILE_STORES
        and repr(location) not in message  # a failed open names its store itself
    ):
        return f"{kind} store {location!r}: {message}"
    return message


def add_parser(subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Register ``sessions`` and its sub-commands, each taking the options of *parents*."""
    common = argparse.ArgumentParser(add_help=False, parents=list(parents))
    common.add_argument(
        "--store",
        type=_store_argument,
        default=argparse.SUPPRESS,
        help=f"sqlite:PATH | jsonl:DIR | postgres:DSN (default {DEFAULT_STORE})",
    )
    parser = subparsers.add_parser(
        "sessions", parents=[common], help="inspect and move stored sessions"
    )
    # The metavar argparse would show anyway, given so a missing command is named by its
    # choices rather than by this attribute's name.
    commands = parser.add_subparsers(
        dest="sessions_command", required=True, metavar="{" + ",".join(_COMMANDS) + "}"
    )
    commands.add_parser(
        "list",
        parents=[common],
        help="list stored sessions (headers only)",
        description="List stored sessions (headers only). A stored session left out, its "
        "header unreadable, naming another session or of a format version this build does "
        "not read, or its JSONL file in two cwd buckets (which show and export refuse), is "
        "named on stderr with the problem, and the status is then 1.",
    )
    show = commands.add_parser(
        "show",
        parents=[common],
        help="print a session's turns, steps and tools",
        description="Print a stored session's turns, steps and tool calls, as a load would "
        "read it, without taking it (a live agent may hold it). Stored records a load would "
        "discard as a torn tail are noted after them.",
    )
    show.add_argument("id", help=_ID_HELP)
    export = commands.add_parser(
        "export",
        parents=[common],
        help="write a session as JSONL",
        description="Write a session as JSONL. Stored records a load would discard as a "
        "torn tail are left out: the events before them are written, the torn tail is "
        "noted on stderr, and the status is then 1. A record written whole out of seq order "
        "(a line repeated or left out by hand) is no torn tail: the export fails, naming "
        "its file and line, and writes nothing. A JSONL file's last line not yet "
        "ended that is no whole record is left out unnoted: a live writer may still be "
        "writing it. An --output "
        "that is the store's own file, or lies in its directory, is refused.",
    )
    export.add_argument("id", help=_ID_HELP)
    export.add_argument("-o", "--output", help="file to write (default, or -: standard output)")
    imported = commands.add_parser(
        "import",
        parents=[common],
        help="store a session from a JSONL file",
        description="Store a session from a JSONL file, as export writes it. A log that "
        "does not load as written (a line that is no event, an event out of seq order or "
        "breaking an invariant, a fork's seed_length past the log) is "
        "refused, naming the file and line, and nothing is stored.",
    )
    imported.add_argument("file", help="the JSONL file (-: standard input)")
    imported.add_argument("--id", dest="new_id", help="store it under this id instead")
    replay = commands.add_parser(
        "replay",
        parents=[common],
        help="re-derive history and check invariants",
        description="Check a stored session: its log's invariants (every tool call has "
        "one result, seq order, turns enclosed) and that the history rebuilt from the log "
        "matches an independent fold of it. Prints what it found; the status is 1 when "
        "an invariant is broken or stored records a load would discard are left out.",
    )
    replay.add_argument("id", help=_ID_HELP)
    delete = commands.add_parser(
        "delete",
        parents=[common],
        help="delete a stored session",
        description="Delete a stored session: its header and every event, all at once, then "
        "print 'deleted ID'. A session another process holds (a live agent) is refused and "
        "left as it is, as is an id the store does not hold: the status is then 1. Forks of "
        "it keep their own copy of what they were seeded with. A store that does not exist "
        "is refused, not created.",
    )
    delete.add_argument("id", help=_ID_HELP)
    parser.set_defaults(handler=run)


_ID_HELP = "the stored session's id"


def _store_argument(spec: str) -> str:
    """Check a ``--store`` value when the command line is parsed: a malformed one is a
    usage error (status 2), as the demo's is, not a failure of the command."""
    try:
        parse_store_spec(spec)
    except ConfigError as exc:  # a path no file can have
        raise argparse.ArgumentTypeError(exc.message) from None
    return spec


def run(args: argparse.Namespace) -> int:
    """Run one ``sessions`` sub-command; returns the exit status (1 on a store error)."""
    command = _COMMANDS[args.sessions_command]
    spec = getattr(args, "store", DEFAULT_STORE)
    try:
        if sys.stdout is None and _prints_result(args):
            # Started with it closed (``>&-``): print would drop the result without a word.
            raise OSError(errno.EBADF, "cannot write the result: standard output is closed")
        # A delete needs a store that exists too, and leaves one that is not a retinue
        # store (a mistyped path) as it is: opened to read, it still deletes.
        existing = args.sessions_command in _READ_ONLY or args.sessions_command == "delete"
        if existing:
            _check_exists(spec)
        if args.sessions_command == "export" and not _prints_result(args):
            refuse_store_overwrite(*parse_store_spec(spec), args.output)
        store = open_store(spec, create=not existing)
        return int(trio.run(command, store, args))
    except BrokenPipeError:
        # The reader went away (``| head``): stay quiet, and keep the interpreter's
        # final flush of standard output from failing again.
        discard_stdout()
        return 1
    except (RetinueError, argparse.ArgumentTypeError, OSError) as exc:
        complain(f"retinue sessions {args.sessions_command}: {store_problem(spec, exc)}")
        return 1


async def _list(store: BufferedStore, _args: argparse.Namespace) -> int:
    async with store:
        listing = await store.listing()
    for header in listing.headers:
        extras = [f"cwd={header.cwd}"] if header.cwd else []
        if header.parent_session:
            extras.append(f"parent={header.parent_session} seed={header.seed_length}")
        # Extras left out when none, not stripped: a cwd may end in whitespace of its own.
        fields = [header.id, when(header.created_at), *([" ".join(extras)] if extras else [])]
        print("\t".join(map(printable, fields)))
    for skipped in listing.skipped:
        complain(f"retinue sessions list: skipped {printable(skipped.problem)}")
    return 1 if listing.skipped else 0


async def _show(store: BufferedStore, args: argparse.Namespace) -> int:
    async with store:
        recovered = await store.inspect_recovered(args.id)
    for line in describe(recovered.session, dropped=recovered.dropped):
        print(printable(line))
    return 0


async def _export(store: BufferedStore, args: argparse.Namespace) -> int:
    async with store:
        recovered = await store.inspect_recovered(args.id)
    session = recovered.session
    text = to_jsonl(session)
    if args.output and args.output != STANDARD_STREAM:
        await write_output(args.output, text)
    else:
        _write_utf8(text)
    if recovered.dropped:
        # What was written is what a load keeps, not all the store holds.
        note = torn_tail(len(session.events), recovered.dropped)
        complain(f"retinue sessions export: {session.id}: warning: {note}")
        return 1
    return 0


def _write_utf8(text: str) -> None:
    """Write *text* to standard output as UTF-8, the JSONL format's encoding, whatever
    the console's own (an ASCII or Latin-1 one could not write every event)."""
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # replaced by a text-only stream
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    binary.write(text.encode("utf-8"))
    binary.flush()


async def _import(store: BufferedStore, args: argparse.Namespace) -> int:
    text, source = await read_import(args.file)
    session = read_jsonl(text, source=source, new_id=args.new_id)
    if not session.events:
        # A store writes a session with its first event, so this would store nothing.
        complain(f"retinue sessions import: {source} has no events to import")
        return 1
    try:
        async with store:
            if await store.exists(session.id):
                complain(f"retinue sessions import: session {session.id!r} already exists")
                return 1
            store.attach_new(session)
            await store.detach(session)
    except BaseException:
        # Ctrl-C during the commit's thread lands at the next checkpoint, in the detach or
        # the close, the session stored by then: the confirmation says so before it ends.
        if store.statistics().committed_events:
            with contextlib.suppress(OSError):  # what ends the command is the error raised
                _imported(session)
        raise
    _imported(session)
    return 0


def _imported(session: Session) -> None:
    print(f"imported {session.id} ({len(session.events)} events)")


async def _replay(store: BufferedStore, args: argparse.Namespace) -> int:
    from retinue.testing import InvariantError, check_history_replay, check_session_invariants

    async with store:
        recovered = await store.inspect_recovered(args.id)
    session = recovered.session
    try:
        check_session_invariants(session.events)
        check_history_replay(session.events, session_id=session.id)
    except InvariantError as exc:
        print(printable(f"{session.id}: invariant broken: {exc}"))
        return 1
    if recovered.dropped:
        # What was kept may replay cleanly, but the stored log is not all there.
        print(f"{session.id}: warning: {torn_tail(len(session.events), recovered.dropped)}")
    turns = sum(1 for event in session.events if isinstance(event.data, TurnStart))
    print(
        f"{session.id}: {'kept' if recovered.dropped else 'ok'}: {len(session.events)} events, "
        f"{turns} turn{'' if turns == 1 else 's'}, "
        f"{len(session.derive_messages())} history messages"
    )
    if session.is_turn_open:
        print(f"{session.id}: ends inside turn {session.last_turn}; loading it closes the turn")
    return 1 if recovered.dropped else 0


async def _delete(store: BufferedStore, args: argparse.Namespace) -> int:
    async with store:
        await store.delete(args.id)
    print(printable(f"deleted {args.id}"))
    return 0


def _prints_result(args: argparse.Namespace) -> bool:
    """Whether the command's result goes to standard output (an import only confirms it)."""
    command: str = args.sessions_command
    if command == "export":
        # An empty --output writes to standard output too.
        return args.output in ("", None, STANDARD_STREAM)
    return command != "import"


# Commands that only read: a mistyped path must not create (or convert) a store there.
_READ_ONLY = frozenset({"list", "show", "export", "replay"})


def _check_exists(spec: str) -> None:
    kind, location = parse_store_spec(spec)
    if kind != "postgres" and not Path(location).exists():
        raise argparse.ArgumentTypeError(f"no {kind} store at {location!r}")


_COMMANDS: dict[str, Callable[[BufferedStore, argparse.Namespace], Any]] = {
    "list": _list,
    "show": _show,
    "export": _export,
    "import": _import,
    "replay": _replay,
    "delete": _delete,
}
