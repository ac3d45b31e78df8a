"""The ``retinue`` console script's entry point.

It lives outside the ``retinue`` package: a script that imports ``retinue.cli``
imports the whole package first, and Ctrl-C during that import ends in a
traceback however ``retinue.cli.main`` handles it.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

INTERRUPTED = 130
"""The exit status after Ctrl-C: 128 + SIGINT, as shells report it."""


def main() -> int:
    """Import and run the ``retinue`` command; Ctrl-C during the import ends it as
    it ends the command (one line, status 130)."""
    try:
        from retinue.cli import main as run
    except KeyboardInterrupt:
        if sys.stderr is not None:  # closed (``2>&-``): the status alone tells
            print("retinue: interrupted", file=sys.stderr)
        return INTERRUPTED
    return run()
