"""``manage``'s ``on_retry``: a plain callable, called at each retry and never awaited."""

from __future__ import annotations

import functools
import logging
from collections.abc import Coroutine
from typing import Any

import pytest
import trio

from retinue._stream import STOP, Finish, TextDelta, Usage, UsageChunk
from retinue.providers import RateLimitError, RetryNotice, RetryPolicy, manage

from .support import FakeModel, collect, make_request

OK = [TextDelta(0, "hi"), UsageChunk(Usage(10, 2)), Finish(STOP)]


def _rate_limited(after: float | None) -> RateLimitError:
    return RateLimitError(
        "slow down", code="rate_limit_exceeded", status=429, retry_after=after, retryable=True
    )


class _AsyncCallable:
    async def __call__(self, notice: RetryNotice) -> None:
        await trio.lowlevel.checkpoint()


async def _async_on_retry(notice: RetryNotice) -> None:
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    "on_retry",
    [
        _async_on_retry,
        _AsyncCallable(),
        functools.partial(_AsyncCallable()),
        functools.partial(functools.partial(_AsyncCallable())),
    ],
    ids=["async-function", "async-callable", "partial-async-callable", "partial-of-partial"],
)
def test_manage_refuses_an_async_retry_callback(on_retry: Any) -> None:
    """``on_retry`` is called, never awaited: an async one is refused when ``manage`` wraps
    the model, where its coroutine was dropped unawaited at every retry; so is a partial of
    an instance whose ``__call__`` is async."""
    with pytest.raises(TypeError, match=r"^manage's on_retry must be a plain callable"):
        manage(FakeModel([]), on_retry=on_retry)


async def test_manage_takes_a_class_whose_instances_are_async_callable(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A class is called, not awaited, whatever its instances' ``__call__``: calling it only
    builds an instance, so it is taken and called at each retry, where it was refused."""
    made: list[RetryNotice] = []

    class Record:
        def __init__(self, notice: RetryNotice) -> None:
            made.append(notice)

        async def __call__(self) -> None:
            await trio.lowlevel.checkpoint()

    inner = FakeModel([_rate_limited(0.5), OK])
    model = manage(inner, retry=RetryPolicy(), on_retry=Record)  # type: ignore[arg-type]
    with trio.fail_after(100):
        await collect(model, make_request("hi"))
    assert [notice.attempt for notice in made] == [1]


async def test_manage_closes_and_logs_an_awaitable_a_retry_callback_returns(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain callable that returns a coroutine (a lambda around an async function) is
    told of the retry; its coroutine is closed, not left unawaited, and the mistake is
    logged, and the retry still happens."""
    notices: list[RetryNotice] = []

    async def record(notice: RetryNotice) -> None:
        await trio.lowlevel.checkpoint()
        notices.append(notice)

    def relay(notice: RetryNotice) -> Coroutine[Any, Any, None]:
        return record(notice)

    inner = FakeModel([_rate_limited(0.5), OK])
    model = manage(inner, retry=RetryPolicy(), on_retry=relay)  # type: ignore[arg-type]
    with trio.fail_after(100), caplog.at_level(logging.ERROR, logger="retinue.providers"):
        collected = await collect(model, make_request("hi"))
    assert collected.assembler.finish is STOP
    assert (len(inner.started), notices) == (2, [])
    messages = [r.getMessage() for r in caplog.records if r.name == "retinue.providers"]
    assert messages == ["an on_retry callback returned an awaitable, which is never awaited"]
