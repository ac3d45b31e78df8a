"""The ``retinue`` command: ``demo`` and ``sessions``."""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.metadata
import io
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ._output import complain, discard_stdout

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose ``--help`` and ``--version`` raise the error of a write
    to standard output: argparse drops it, and exits 0 having shown nothing.

    Its sub-commands' parsers are of its class too.
    """

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if message and file is not None and file is sys.stdout:
            file.write(message)
            return
        super()._print_message(message, file)

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        """Write the help to *file*, standard output unless given; closed (``>&-``), it
        raises the error a write would: argparse would write the help to stderr and exit 0."""
        if file is None and sys.stdout is None:
            raise _closed("the help")
        super().print_help(file)


class _ShowVersion(argparse.Action):
    """``--version``: write the version to standard output and exit, as argparse's action
    does; closed (``>&-``), it raises the error a write would, where argparse's would
    write the version to stderr and exit 0."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        _namespace: argparse.Namespace,
        _values: object,
        _option_string: str | None = None,
    ) -> None:
        if sys.stdout is None:
            raise _closed("the version")
        sys.stdout.write(f"{parser.prog} {_version()}\n")
        parser.exit()


def _closed(what: str) -> OSError:
    """The error of a write of *what* to a standard output that was closed at the start."""
    return OSError(errno.EBADF, f"cannot write {what}: standard output is closed")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="retinue",
        description="An actor-model runtime for LLM agents.",
        parents=[_verbose_option(default=False)],
    )
    parser.add_argument(
        "--version",
        action=_ShowVersion,
        nargs=0,
        default=argparse.SUPPRESS,
        help="show program's version number and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    # Suppressed below the sub-command, so its default does not undo a -v given before it.
    after_command = [_verbose_option(default=argparse.SUPPRESS)]
    from ._demo import add_parser as add_demo

    add_demo(commands, after_command)
    try:
        from ._sessions import add_parser as add_sessions
    except ImportError:  # pragma: no cover - the sessions command ships with the stores
        pass
    else:
        add_sessions(commands, after_command)
    # The metavar argparse shows anyway, given so a missing or unknown command is named by
    # its choices rather than by this attribute's name.
    commands.metavar = "{" + ",".join(commands.choices) + "}"
    return parser


def _verbose_option(*, default: object) -> argparse.ArgumentParser:
    option = argparse.ArgumentParser(add_help=False)
    option.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log warnings and errors"
    )
    return option


def _version() -> str:
    try:
        return importlib.metadata.version("retinue")
    except importlib.metadata.PackageNotFoundError:  # a source tree on the path, never installed
        return "(version unknown: not installed)"


INTERRUPTED = 130
"""The exit status after Ctrl-C: 128 + SIGINT, as shells report it."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``retinue`` command; returns the exit status.

    Ctrl-C ends it with one line and status 130, also when the interrupt
    reaches it inside the exception group of a nursery it cancelled.
    """
    # Named by its sub-command once parsed; parsing imports the sub-commands' modules.
    command = "retinue"
    try:
        try:
            args = _parser().parse_args(argv)
        except OSError as exc:  # --help or --version, written at once (unbuffered) or closed
            return _unwritable(command, exc, report=True)
        except SystemExit:
            # --help and --version exit once written: buffered, their write is yet to fail.
            unwritten = _flush_stdout(command, report=True)
            if unwritten is not None:
                return unwritten
            raise
        # As its own lines name it: ``retinue sessions list``, not ``retinue sessions``.
        command = " ".join(["retinue", args.command, *_sub_command(args)])
        logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL)
        with _escaping_stdout():
            status = int(args.handler(args) or 0)
            # A command that failed has said why, an output it could not write among them.
            unwritten = _flush_stdout(command, report=status == 0)
    except KeyboardInterrupt:
        return _interrupted(command)
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        return _interrupted(command)
    return status if unwritten is None else unwritten


def _sub_command(args: argparse.Namespace) -> list[str]:
    name = getattr(args, "sessions_command", None)
    return [name] if name else []


def _flush_stdout(command: str, *, report: bool) -> int | None:
    """Write out what standard output holds; the exit status when it cannot be written.

    Not a terminal, standard output is buffered: a write it cannot take (a full
    disk, ``> /dev/full``) fails when flushed, here rather than as the interpreter
    exits, which would report it with a traceback and exit 120.
    """
    stdout = sys.stdout
    if stdout is None:
        return None
    try:
        stdout.flush()
    except OSError as exc:
        return _unwritable(command, exc, report=report)
    return None


def _unwritable(command: str, error: OSError, *, report: bool) -> int:
    """End a command whose output *error* kept from standard output: status 1, and one
    line, when *report*, unless the reader went away (``| head``), which ends it quietly."""
    discard_stdout()
    if report and not isinstance(error, BrokenPipeError):
        # As the commands report a write that fails before they end.
        complain(f"{command}: {error}")
    return 1


@contextlib.contextmanager
def _escaping_stdout() -> Iterator[None]:
    """Escape what the console's encoding cannot show (an ASCII one, say) instead of
    failing on it; the stream is as it was afterwards (``main`` may run in-process)."""
    stdout = sys.stdout
    if not isinstance(stdout, io.TextIOWrapper):
        yield
        return
    errors = stdout.errors
    stdout.reconfigure(errors="backslashreplace")
    try:
        yield
    finally:
        try:
            stdout.reconfigure(errors=errors)
        except OSError:  # its flush: the command ends otherwise, and has said why
            discard_stdout()
            stdout.reconfigure(errors=errors)


def _interrupted(command: str) -> int:
    complain(f"{command}: interrupted")
    return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
