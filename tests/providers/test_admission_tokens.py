"""Token counts given to admission (an estimate at admission, the real count after) are
checked where they are given: the lane's budget is shared by every request in it."""

from __future__ import annotations

import math

import pytest
import trio

from retinue._stream import STOP, Finish, TextDelta, Usage, UsageChunk
from retinue.providers import AdmissionController, AdmissionLimits, manage

from .support import FakeModel, collect, make_request

NOT_COUNTS = pytest.mark.parametrize(
    ("tokens", "error"),
    [
        ("lots", TypeError),
        (True, TypeError),
        (-100_000, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
    ],
    ids=["str", "bool", "negative", "nan", "infinite"],
)


def _budgeted() -> AdmissionController:
    return AdmissionController(AdmissionLimits(max_concurrent=1, tokens_per_minute=1000))


@NOT_COUNTS
async def test_admission_refuses_a_token_estimate_that_is_no_count(
    tokens: object, error: type[Exception], autojump_clock: trio.abc.Clock
) -> None:
    """An estimate the window cannot sum is refused at admission, naming it: a negative
    one is not admitted as budget freed, and NaN or infinity cannot leave the window's sum
    NaN, which would admit one request per window from then on."""
    admission = _budgeted()
    with trio.fail_after(60), pytest.raises(error, match="tokens"):
        async with admission.admit(provider="p", model="m", tokens=tokens):  # type: ignore[arg-type]
            pass
    assert admission.statistics().in_flight == 0


async def test_a_token_estimate_that_is_no_count_fails_only_its_own_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The request ahead of a bad estimate leaves the lane unharmed: the bad waiter is
    not queued, so the release of the request ahead raises no ValueError."""
    admission = _budgeted()
    refused: list[BaseException] = []

    async def ahead() -> None:
        async with admission.admit(provider="p", model="m", session_id="ahead", tokens=100):
            await trio.sleep(5)

    async def bad() -> None:
        try:
            async with admission.admit(provider="p", model="m", tokens="lots"):  # type: ignore[arg-type]
                pass
        except TypeError as exc:
            refused.append(exc)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ahead)
            await trio.sleep(1)
            nursery.start_soon(bad)
        async with admission.admit(provider="p", model="m", tokens=100):
            pass
    assert len(refused) == 1
    assert admission.statistics().lanes[0].tokens_in_window == 200


@NOT_COUNTS
async def test_a_ticket_refuses_a_usage_that_is_no_count(
    tokens: object, error: type[Exception], autojump_clock: trio.abc.Clock
) -> None:
    """The real count corrects the estimate in the shared window: one that is no count
    is refused, and the estimate stands."""
    admission = _budgeted()
    async with admission.admit(provider="p", model="m", tokens=100) as ticket:
        with pytest.raises(error, match="tokens"):
            ticket.record_usage(tokens)  # type: ignore[arg-type]
    assert admission.statistics().lanes[0].tokens_in_window == 100


@pytest.mark.parametrize("tokens", [5_000, 10**400], ids=["past-the-limit", "past-a-float"])
async def test_a_ticket_charges_a_usage_past_the_limit_as_the_whole_limit(
    tokens: int, autojump_clock: trio.abc.Clock
) -> None:
    """R10.6: a usage count past the budget, even one past a float's range (a JSON int
    a server may send), is taken and charged as the whole limit: the lane waits out its
    window, and the stream that reported it is not failed for it."""
    admission = _budgeted()
    with trio.fail_after(600):
        async with admission.admit(provider="p", model="m", tokens=100) as ticket:
            ticket.record_usage(tokens)
        assert admission.statistics().lanes[0].tokens_in_window == 1000
        async with admission.admit(provider="p", model="m", tokens=100):
            assert trio.current_time() == pytest.approx(60.0)


async def test_a_managed_stream_whose_usage_is_past_a_float_completes_under_admission(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.6: a stream whose usage is too large for a float completes under admission
    as it does without, where the count failed the call."""
    chunks = [TextDelta(0, "fine"), UsageChunk(Usage(10**400, 1)), Finish(STOP)]
    admission = _budgeted()
    model = manage(FakeModel([chunks]), admission=admission)
    with trio.fail_after(60):
        collected = await collect(model, make_request("hi"))
    assert collected.chunks == chunks
    assert model.statistics().failures == 0
    assert admission.statistics().lanes[0].tokens_in_window == 1000
