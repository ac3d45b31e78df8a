"""``retinue sessions show``: a turn's end names its error code, and the model each request
went to is shown where it changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.providers import LlmCallConfig
from retinue.session import Session
from retinue.testing import FinishWithError, Reply, ScriptedModel

VIRTUAL_DEADLINE = 60.0


async def _switch_to_b(
    agent: retinue.Agent,
    turn: int,
    step: int,
    config: LlmCallConfig,
    call_next: Callable[[], Awaitable[LlmCallConfig]],
) -> LlmCallConfig:
    return attrs.evolve(await call_next(), model="b")


async def _three_turns() -> Session:
    """Turn 1 on model ``a``; turns 2 and 3 on ``b``, which a listener picks (R7.32 keeps it):
    turn 2 fails with the code ``E1``."""
    model = ScriptedModel(
        {"a": [Reply("one")], "b": [FinishWithError("bad", code="E1"), Reply("two")]}
    )
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("w", AgentOptions(model="a"), session_id="s1")
            await agent.ask("first")
            unregister = rt.hooks.on("agent/request", _switch_to_b, agent=agent)
            await agent.ask("second")
            unregister()
            await agent.ask("third")
    return agent.session


def _imported(run: Callable[[], Awaitable[Session]], tmp_path: Path) -> str:
    """The store a session *run* on a virtual clock is stored in through ``sessions import``."""
    session = trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    exported = tmp_path / "s1.jsonl"
    exported.write_text(to_jsonl(session), encoding="utf-8")
    store = f"jsonl:{tmp_path / 'store'}"
    assert main(["sessions", "import", str(exported), "--store", store]) == 0
    return store


@pytest.fixture
def shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What ``sessions show`` prints of the three turns, stored through ``sessions import``."""
    store = _imported(_three_turns, tmp_path)
    capsys.readouterr()
    assert main(["sessions", "show", "s1", "--store", store]) == 0
    return capsys.readouterr().out.splitlines()


def test_show_names_an_error_end_by_its_code(shown: list[str]) -> None:
    """R4.12: an ``error`` end logs its message and code; ``show`` prints both, the code
    where a tool result's line has it, so a failure is told apart by its code."""
    assert "  end: error E1 (bad)" in shown
    assert shown.count("  end: completed") == 2


def test_show_names_the_model_of_the_first_request_and_of_each_change(shown: list[str]) -> None:
    """R8.4: each request's header event logs its model when it changes; ``show`` prints it in
    the step whose request it went to, once per change: turn 3 kept ``b`` and shows none."""
    assert [line for line in shown if line.startswith("    model: ")] == [
        "    model: a",
        "    model: b",
    ]
    assert shown[shown.index("turn 1  (message from user)") + 3] == "    model: a"
    assert shown[shown.index("turn 2  (message from user)") + 3] == "    model: b"


def test_replay_counts_one_turn_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R4.16: ``replay`` reports what it re-derived; one turn reads "1 turn"."""

    async def one_turn() -> Session:
        with trio.fail_after(VIRTUAL_DEADLINE):
            async with retinue.open_runtime(models=ScriptedModel([Reply("one")])) as rt:
                agent = await rt.create_agent("w", AgentOptions(model="scripted"), session_id="s1")
                await agent.ask("first")
        return agent.session

    store = _imported(one_turn, tmp_path)
    capsys.readouterr()
    assert main(["sessions", "replay", "s1", "--store", store]) == 0
    assert ", 1 turn, 2 history messages" in capsys.readouterr().out
