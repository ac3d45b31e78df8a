"""``retinue demo``: the README's main command draws a table that follows the agents."""

from __future__ import annotations

import argparse
import re

import pytest
import trio

from retinue.cli._demo import run_demo

REAL_DEADLINE = 60.0


def _args(**overrides: object) -> argparse.Namespace:
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


async def test_the_last_table_shows_every_agents_turns(capsys: pytest.CaptureFixture[str]) -> None:
    """Against the embedded mock server, the table is drawn until every agent has finished."""
    with trio.fail_after(REAL_DEADLINE):
        assert await run_demo(_args()) == 0
    out = capsys.readouterr().out
    last_table = out[out.rindex("retinue demo:") :]
    rows = re.findall(r"agent-(\d\d)\s*│\s*(\w+)\s*│\s*(\d+)\s*│\s*(\d+)", last_table)
    assert [(agent, status) for agent, status, _, _ in rows] == [
        ("00", "idle"),
        ("01", "idle"),
        ("02", "idle"),
    ]
    turns = sum(int(count) for _, _, count, _ in rows)
    assert all(int(count) >= 1 for _, _, count, _ in rows)
    assert f"3 agents, {turns} turns" in out
