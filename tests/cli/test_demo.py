"""``retinue demo``: the README's main command draws a table that follows the agents."""

from __future__ import annotations

import argparse
import re

import pytest
import trio

from retinue.cli import main
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


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--store", "memory", "--agents", "0"], "argument --agents: must be at least 1, got 0"),
        (["--store", "memory", "--turns", "-1"], "argument --turns: must be at least 1, got -1"),
        (["--store", "bogus"], "argument --store: invalid store 'bogus'"),
        (["--store", "jsonl:"], "argument --store: invalid store 'jsonl:'"),
        (["--store", "redis:localhost"], "argument --store: unknown store kind 'redis'"),
        (["--store", "memory", "--latency", "inf"], "argument --latency: must be finite, got inf"),
        (["--store", "memory", "--latency", "nan"], "argument --latency: must be finite, got nan"),
        (["--store", "memory", "--latency", "-1"], "argument --latency: must be >= 0, got -1"),
        (
            ["--store", "memory", "--latency", "soon"],
            "argument --latency: must be a number of seconds, got 'soon'",
        ),
    ],
)
def test_demo_refuses_bad_arguments_before_it_starts(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input gets a usage error naming the argument, not a traceback from inside the run."""
    with pytest.raises(SystemExit) as caught:
        main(["demo", "--no-live", *argv])
    assert caught.value.code == 2
    assert complaint in capsys.readouterr().err


def test_demo_reports_a_provider_it_cannot_use_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing API key ends the demo with status 1 and one line naming the problem."""
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    status = main(["demo", "--provider", "openai", "--store", "memory", "--no-live"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("retinue demo: ")
    assert "OPENAI_API_KEY" in err
    assert "Traceback" not in err
