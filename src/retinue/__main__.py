"""``python -m retinue``: the ``retinue`` command."""

from __future__ import annotations

import sys

from retinue.cli import main

sys.exit(main())
