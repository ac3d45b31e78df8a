"""Agent options show a refused value cut short, as every refusal does (R2.5, R2.6)."""

from __future__ import annotations

from typing import Any

import pytest

import retinue
from retinue.testing import Reply, ScriptedModel

# Past the interpreter's limit on converting an int to digits: its repr raises ValueError.
UNWRITABLE = -(10**5000)
LONG = [0.5] * 100_000
FIELDS = ["model", "provider", "max_tokens", "temperature", "system_prompt", "cwd", "stop"]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", [UNWRITABLE, LONG], ids=["unwritable-int", "long-list"])
def test_agent_options_refuse_a_value_showing_it_short(field: str, value: Any) -> None:
    """R2.6: an option whose value cannot be shown whole is still a ConfigError naming
    the option. An int of more than 4300 digits escaped as the ``ValueError`` of its
    own repr, and a long list filled a message of megabytes."""
    with pytest.raises(retinue.ConfigError, match=f"^{field} ") as refused:
        retinue.AgentOptions(**{field: value})
    assert len(str(refused.value)) < 300


def test_a_stop_sequence_of_another_kind_is_refused_showing_it_short() -> None:
    """R2.6: a stop list's wrong item is named by its index and shown short."""
    with pytest.raises(retinue.ConfigError, match=r"^stop .*item 1 is an integer of 16610 bits"):
        retinue.AgentOptions(stop=["END", UNWRITABLE])  # type: ignore[list-item]


async def test_open_runtime_refuses_a_system_prompt_showing_it_short() -> None:
    """R2.7, R13.2: the runtime's persona is checked as an agent's is, its value shown short."""
    model = ScriptedModel([Reply("ok")])
    with pytest.raises(retinue.ConfigError, match=r"^system_prompt ") as refused:
        async with retinue.open_runtime(models=model, system_prompt=UNWRITABLE):  # type: ignore[arg-type]
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body
    assert "an integer of 16610 bits" in str(refused.value)
