"""The ``retinue`` command: ``demo`` and ``sessions``."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import logging
import sys
from collections.abc import Iterator, Sequence

from ._output import complain

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="retinue",
        description="An actor-model runtime for LLM agents.",
        parents=[_verbose_option(default=False)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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
        args = _parser().parse_args(argv)
        command = f"retinue {args.command}"
        logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL)
        with _escaping_stdout():
            status = args.handler(args)
    except KeyboardInterrupt:
        return _interrupted(command)
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        return _interrupted(command)
    return int(status or 0)


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
        stdout.reconfigure(errors=errors)


def _interrupted(command: str) -> int:
    complain(f"{command}: interrupted")
    return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
