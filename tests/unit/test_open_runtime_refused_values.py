"""``open_runtime`` and ``RestartPolicy`` show a refused value cut short (R13.1, R13.2).

The message names the argument and shows its value as the other refusals do:
an int too long to convert to digits as its size, a long repr as its start.
"""

from __future__ import annotations

from typing import Any

import pytest

import retinue
from retinue.testing import Reply, ScriptedModel

MODEL = ScriptedModel([Reply("ok")], repeat_last=True)
# Past the interpreter's limit on converting an int to digits: its repr raises ValueError.
UNWRITABLE = -(10**5000)
LONG = [0] * 100_000

ARGUMENTS = [
    "restart",
    "retry",
    "admission",
    "config",
    "store",
    "models",
    "tools",
    "variables",
    "tool_order",
    "flush_timeout",
    "max_parallel_tool_calls",
]


@pytest.mark.parametrize("name", ARGUMENTS)
@pytest.mark.parametrize("value", [UNWRITABLE, LONG], ids=["unwritable-int", "long-list"])
async def test_open_runtime_refuses_an_argument_showing_its_value_short(
    name: str, value: object
) -> None:
    """R13.1, R13.2: an argument whose value cannot be shown whole is still refused
    with a ConfigError naming it. An int of more than 4300 digits escaped as the
    ``ValueError`` of its own repr, and a long list filled a message of megabytes."""
    arguments: dict[str, Any] = {"models": MODEL, name: value}
    with pytest.raises(retinue.ConfigError, match=f"^{name}") as refused:
        async with retinue.open_runtime(**arguments):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"tools": [UNWRITABLE]}, r"^tools\[0\] "),
        ({"variables": {"a": UNWRITABLE}}, r"^variables\['a'\] "),
        ({"variables": {UNWRITABLE: "x"}}, r"^variables: "),
        ({"tool_order": [UNWRITABLE]}, r"^tool_order\[0\] "),
    ],
)
async def test_open_runtime_refuses_an_item_showing_its_value_short(
    arguments: dict[str, Any], named: str
) -> None:
    """R13.2: an item of a collection argument is refused naming its place, whatever its value."""
    with pytest.raises(retinue.ConfigError, match=named) as refused:
        async with retinue.open_runtime(models=MODEL, **arguments):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body
    assert "an integer of 16610 bits" in str(refused.value)


@pytest.mark.parametrize("value", [UNWRITABLE, LONG], ids=["unwritable-int", "long-list"])
def test_restart_policy_refuses_a_restart_count_showing_it_short(value: Any) -> None:
    """DESIGN 4: a ``max_restarts`` that is no non-negative int is a ConfigError naming it, however
    it shows: an int too long to show does not escape as a bare ``ValueError``."""
    with pytest.raises(retinue.ConfigError, match=r"^RestartPolicy\.max_restarts ") as refused:
        retinue.RestartPolicy(max_restarts=value)
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize("value", [UNWRITABLE, LONG], ids=["unwritable-int", "long-list"])
async def test_a_runtime_tool_call_cap_set_later_is_refused_showing_it_short(value: Any) -> None:
    """R9.11, R13.2: the cap set on an open runtime is checked as the argument is."""
    async with retinue.open_runtime(models=MODEL) as rt:
        with pytest.raises(retinue.ConfigError, match=r"^max_parallel_tool_calls ") as refused:
            rt.max_parallel_tool_calls = value
        assert len(str(refused.value)) < 300


@pytest.mark.parametrize("value", [UNWRITABLE, "x" * 1_000_000], ids=["unwritable-int", "long-str"])
async def test_a_session_id_no_store_can_hold_is_refused_showing_it_short(value: Any) -> None:
    """R11.3: an id refused for an agent, a resume or a fork shows itself cut short: an int too long
    to show does not escape as the ``ValueError`` of its repr, nor is a long string quoted whole."""
    async with retinue.open_runtime(models=MODEL) as rt:
        source = await rt.create_agent("source", retinue.AgentOptions(model="scripted"))
        attempts = [
            rt.create_agent("a", retinue.AgentOptions(model="scripted"), session_id=value),
            rt.resume_agent(value),
        ]
        for attempt in attempts:
            with pytest.raises(retinue.SessionError) as refused:
                await attempt
            assert refused.value.code == "INVALID_SESSION_ID"
            assert len(str(refused.value)) < 300
        with pytest.raises(retinue.SessionError) as refused:
            rt.fork_agent_session(source.id, value)
        assert len(str(refused.value)) < 300
