"""``python -m retinue``: the ``retinue`` command."""

from __future__ import annotations

import sys

from retinue.cli import main

if __name__ == "__main__":
    sys.exit(main())
