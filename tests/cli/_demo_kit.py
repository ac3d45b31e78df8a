"""The parsed arguments the ``retinue demo`` modules start a demo with."""

from __future__ import annotations

import argparse


def demo_args(**overrides: object) -> argparse.Namespace:
    defaults: dict[str, object] = {
        "agents": 3,
        "turns": 2,
        "latency": 0.05,
        "seed": 7,
        "provider": "mock",
        "model": None,
        "base_url": None,
        "store": "memory",
        "no_live": False,
    }
    defaults.update(overrides)
    return argparse.Namespace(**defaults)
