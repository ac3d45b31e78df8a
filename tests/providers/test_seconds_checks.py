"""Settings that must be a finite number (of seconds, mostly): one meaning of "a number".

A bool is an int to Python, but ``True`` seconds is a slip, never a setting: every
such setting refuses it, as it refuses text, NaN and infinity. What each accepts
at 0 is its own: a zero wait or pause is one, a zero timeout or limit is not.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retinue.providers import AdmissionController, AdmissionLimits, RetryPolicy
from retinue.providers.openai import OpenAIModel
from retinue.tools import Tool


def _limits(value: object) -> object:
    return AdmissionLimits(window=value)  # type: ignore[arg-type]


def _retry(value: object) -> object:
    return RetryPolicy(base_delay=value)  # type: ignore[arg-type]


def _pause(value: object) -> object:
    AdmissionController().rate_limited("p", "m", value)  # type: ignore[arg-type]
    return None


def _connection(value: object) -> object:
    return OpenAIModel(base_url="http://127.0.0.1:9", api_key="k", timeout=value)  # type: ignore[arg-type]


def _tool(value: object) -> object:
    return Tool("t", "", {"type": "object"}, lambda: None, timeout=value)  # type: ignore[arg-type]


SETTINGS: dict[str, Callable[[object], object]] = {
    "AdmissionLimits.window": _limits,
    "RetryPolicy.base_delay": _retry,
    "rate_limited(retry_after)": _pause,
    "OpenAIModel(timeout)": _connection,
    "Tool.timeout": _tool,
}


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("setting", list(SETTINGS))
async def test_a_bool_is_refused_wherever_a_number_of_seconds_is_asked_for(
    setting: str, value: bool
) -> None:
    """``True`` is an int, yet no setting takes it for one second (nor ``False`` for zero)."""
    with pytest.raises((TypeError, ValueError), match=r"number|finite"):
        SETTINGS[setting](value)


@pytest.mark.parametrize("value", ["1", None])
@pytest.mark.parametrize("field", ["base_delay", "max_delay", "max_retry_after"])
def test_retry_policy_names_the_field_of_a_wait_that_is_not_a_number(
    field: str, value: object
) -> None:
    """Text or ``None`` where a wait belongs is refused naming the field, not by ``math``."""
    with pytest.raises(TypeError, match=rf"RetryPolicy\.{field} .*{value!r}"):
        RetryPolicy(**{field: value})  # type: ignore[arg-type]


def test_a_pause_that_is_not_a_number_is_refused_naming_retry_after() -> None:
    """Text as a ``Retry-After`` is refused naming the argument, not by ``math``."""
    with pytest.raises(TypeError, match="retry_after"):
        AdmissionController().rate_limited("p", "m", "1")  # type: ignore[arg-type]


@pytest.mark.parametrize("setting", ["RetryPolicy.base_delay", "rate_limited(retry_after)"])
@pytest.mark.parametrize("value", [0, 0.0, 2, 2.5])
async def test_a_wait_or_a_pause_of_zero_seconds_or_more_is_accepted(
    setting: str, value: float
) -> None:
    """A zero backoff or pause is a real choice: accepted, as any finite number above."""
    SETTINGS[setting](value)


@pytest.mark.parametrize(
    "setting", ["AdmissionLimits.window", "OpenAIModel(timeout)", "Tool.timeout"]
)
@pytest.mark.parametrize("value", [0, 0.0, -1])
def test_a_window_or_timeout_of_zero_seconds_is_refused(setting: str, value: float) -> None:
    """R9.7: a zero window admits nothing, a zero timeout fails every call: refused when built."""
    with pytest.raises(ValueError, match="positive"):
        SETTINGS[setting](value)


@pytest.mark.parametrize(
    "setting", ["AdmissionLimits.window", "OpenAIModel(timeout)", "Tool.timeout"]
)
@pytest.mark.parametrize("value", [1, 0.001, 2.5])
def test_a_window_or_timeout_above_zero_is_accepted(setting: str, value: float) -> None:
    """Any finite number of seconds above zero is a window or a timeout."""
    SETTINGS[setting](value)


@pytest.mark.parametrize("setting", list(SETTINGS))
async def test_an_int_too_large_for_a_float_is_refused_as_out_of_range(setting: str) -> None:
    """``10**400`` seconds is refused like infinity, with a ``ValueError``, not ``math``'s overflow."""
    try:
        SETTINGS[setting](10**400)
    except ValueError:
        return
    assert setting == "rate_limited(retry_after)", f"{setting} accepted 10**400 seconds"


@pytest.mark.parametrize(
    ("attempts", "error"), [(True, TypeError), (2.0, TypeError), (0, ValueError)]
)
def test_retry_policy_takes_only_a_whole_positive_number_of_attempts(
    attempts: object, error: type[Exception]
) -> None:
    """``True`` is no count of attempts, nor 2.0: refused naming the field, as 0 is."""
    with pytest.raises(error, match="max_attempts"):
        RetryPolicy(max_attempts=attempts)  # type: ignore[arg-type]
