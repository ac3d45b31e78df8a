"""Errors cross process boundaries intact: each one pickles back to an equal error."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

import retinue
from retinue import providers
from retinue.config import AgentEntry, Identity, LoopConfig
from retinue.hooks import HookTimeoutError
from retinue.stores import StoreTimeoutError


def _raised(build: Callable[[], object]) -> BaseException:
    with pytest.raises(retinue.RetinueError) as caught:
        build()
    return caught.value


def _parts(value: object) -> object:
    """An error as comparable data (errors compare by identity): class, message, attributes."""
    if isinstance(value, BaseException):
        return type(value), str(value), {key: _parts(item) for key, item in vars(value).items()}
    if isinstance(value, tuple):
        return tuple(_parts(item) for item in value)
    return value


def _twice_named() -> LoopConfig:
    return LoopConfig(agents=(AgentEntry("a", session_id="s"), AgentEntry("b", session_id="s")))


ERRORS = [
    retinue.RetinueError("plain"),
    retinue.SessionError("refused", code="SEQ_GAP"),
    retinue.StoreError("gone", code="NOT_FOUND"),
    StoreTimeoutError("late", code="FLUSH_TIMEOUT"),
    HookTimeoutError("late", code="FLUSH_TIMEOUT"),
    retinue.ModelError("failed", code="BAD"),
    retinue.ToolError("nope", code="DENIED"),
    retinue.SubscriptionOverflowError("behind", next_seq=7),
    providers.RateLimitError(
        "slow down", code="RATE_LIMITED", status=429, retry_after=2.5, headers={"a": "b"}
    ),
    _raised(lambda: AgentEntry(id="")),
    _raised(lambda: Identity(id="a/b")),
    _raised(_twice_named),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_error_pickles_to_an_equal_error(error: BaseException) -> None:
    """A pickled error keeps its class, message and every attribute (code, status, key ...)."""
    copy = pickle.loads(pickle.dumps(error))
    assert _parts(copy) == _parts(error)


def test_config_errors_keep_their_parts_through_pickle() -> None:
    """A config check's errors rebuild from their key and reason, each listed problem too."""
    error = _raised(_twice_named)
    copy = pickle.loads(pickle.dumps(error))
    parts = [(problem.key, problem.reason) for problem in getattr(copy, "problems", ())]
    assert parts == [("agents[1].session_id", "session 's' is already named by agents[0]")]


@pytest.mark.parametrize("code", [5, b"CODE", ("A",)])
def test_an_error_code_that_is_no_str_is_refused_when_raised(code: object) -> None:
    """R9.2: a tool's ``ToolError`` code is kept on its result only as a str; any other is refused
    at once, not taken and then dropped from the result without a word."""
    with pytest.raises(TypeError, match=r"ToolError code must be a str, got "):
        retinue.ToolError("quota exceeded", code=code)  # type: ignore[arg-type]


def test_an_empty_error_code_is_no_code() -> None:
    """R4.12: an empty code names nothing, so the error carries none (a model's finish
    with an empty code still ends its turn with the model's error and message)."""
    assert retinue.ToolError("quota exceeded", code="").code is None
    assert retinue.ModelError("overloaded", code="").message == "overloaded"
