"""Per-agent options are checked when built (R2.5, R2.6): a bad value never reaches a request."""

from __future__ import annotations

import math
from typing import Any

import pytest

import retinue


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"temperature": math.nan}, "temperature must be a finite number"),
        ({"temperature": math.inf}, "temperature must be a finite number"),
        ({"temperature": "0.5"}, "temperature must be a finite number"),
        ({"temperature": True}, "temperature must be a finite number"),
        ({"max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"max_tokens": 2.0}, "max_tokens must be a positive integer"),
        ({"cwd": "relative/dir"}, "cwd must be an absolute path"),
    ],
)
def test_agent_options_refuse_values_a_request_cannot_carry(
    fields: dict[str, Any], problem: str
) -> None:
    """R2.5, R4.5: each invalid option is a ConfigError naming the option, at construction."""
    with pytest.raises(retinue.ConfigError, match=problem):
        retinue.AgentOptions(model="m", **fields)


def test_agent_options_accept_whole_and_fractional_temperatures() -> None:
    """R2.5: a temperature may be written as an int or a float."""
    assert retinue.AgentOptions(temperature=1).temperature == 1
    assert retinue.AgentOptions(temperature=0.2).temperature == 0.2
