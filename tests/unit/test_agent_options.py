"""Per-agent options are checked when built (R2.5, R2.6): a bad value never reaches a request."""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Any

import pytest

import retinue
from retinue.providers import LlmCallConfig


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"temperature": math.nan}, "temperature must be a finite number"),
        ({"temperature": math.inf}, "temperature must be a finite number"),
        ({"temperature": "0.5"}, "temperature must be a finite number"),
        ({"temperature": True}, "temperature must be a finite number"),
        ({"temperature": -0.1}, "temperature must not be negative, got -0.1"),
        ({"temperature": -1}, "temperature must not be negative, got -1"),
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
    assert retinue.AgentOptions(temperature=0).temperature == 0


@pytest.mark.parametrize(
    ("stop", "problem"),
    [
        ("END", "got 'END'"),
        (b"END", "got b'END'"),
        (5, "got 5"),
        (["END", 1], "item 1 is 1"),
        ([None], "item 0 is None"),
        (["END", ""], "item 1 is ''"),
    ],
)
def test_stop_is_a_sequence_of_strings_never_a_split_string(stop: Any, problem: str) -> None:
    """R2.5: a bare string is refused rather than sent as one stop sequence per character."""
    for build in (retinue.AgentOptions, lambda **fields: LlmCallConfig("m", **fields)):
        with pytest.raises(
            retinue.ConfigError, match="stop must be a sequence of strings"
        ) as raised:
            build(stop=stop)
        assert problem in raised.value.message


def test_stop_sequences_are_kept_in_order() -> None:
    """R2.5: a list or tuple of stop strings is frozen as given."""
    assert retinue.AgentOptions(stop=["END", "STOP"]).stop == ("END", "STOP")
    assert LlmCallConfig("m", stop=("END",)).stop == ("END",)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"model": 5}, "model must be a non-empty string, got 5"),
        ({"model": ""}, "model must be a non-empty string, got ''"),
        ({"provider": ""}, "provider must be a non-empty string, got ''"),
        ({"provider": ["openai"]}, "provider must be a non-empty string"),
        ({"system_prompt": 5}, "system_prompt must be a string, got 5"),
        ({"cwd": 5}, "cwd must be an absolute path as a str, got 5"),
        (
            {"cwd": PurePosixPath("/srv")},
            "cwd must be an absolute path as a str, got PurePosixPath",
        ),
        ({"cwd": "/srv/a\x00b"}, "cwd must not contain a NUL character"),
    ],
)
def test_agent_options_refuse_values_that_would_fail_every_turn(
    fields: dict[str, Any], problem: str
) -> None:
    """R2.5, R2.8: a wrongly typed or empty option is a ConfigError at construction, not a
    TypeError there or an error on every turn (an absent model stays legal until the first step)."""
    with pytest.raises(retinue.ConfigError, match=problem):
        retinue.AgentOptions(**fields)
