"""The ``retinue`` command: ``demo`` and ``sessions``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="retinue", description="An actor-model runtime for LLM agents."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log warnings and errors")
    commands = parser.add_subparsers(dest="command", required=True)
    from ._demo import add_parser as add_demo

    add_demo(commands)
    try:
        from ._sessions import add_parser as add_sessions
    except ImportError:  # pragma: no cover - the sessions command ships with the stores
        pass
    else:
        add_sessions(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``retinue`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL)
    handler = args.handler
    status = handler(args)
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
