"""The default retry policy retries the statuses the official SDKs retry, over real HTTP.

The openai and anthropic SDKs retry 408, 409, 429 and every status from 500;
the proxies in front of their APIs send Cloudflare's 520 to 524 for a
transient failure of the origin. Only 501 and 505, which no retry can mend,
are final.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from retinue._content import Text
from retinue.providers import ProviderStatusError, RetryNotice, RetryPolicy, manage
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy, open_mock_server

from .support import collect, make_request, mock_adapter, served_by

# A real deadline: the adapter talks to the server over a socket, which a virtual
# clock would jump past. No retry waits, so none comes near it.
DEADLINE = 10.0
APIS = ["chat", "responses", "messages"]
PLAIN = (("content-type", "text/plain; charset=UTF-8"),)


def _cloudflare(status: int) -> RawReply:
    """The plain-text page Cloudflare answers with when the origin fails."""
    return RawReply(status, PLAIN, f"error code: {status}".encode())


async def _attempts(api: str, status: int) -> tuple[list[RetryNotice], int, str]:
    """Stream one request through ``manage`` with the default statuses; the notices,
    the calls the server saw and the answer's text."""
    notices: list[RetryNotice] = []
    # The default policy's statuses; no backoff, so a retry goes out at once.
    policy = RetryPolicy(base_delay=0.0)
    script = ScriptedPolicy([_cloudflare(status), MockReply(text="recovered")])
    with trio.fail_after(DEADLINE):
        async with open_mock_server(script) as server, served_by(api, server) as raw:
            model = manage(raw, retry=policy, on_retry=notices.append)
            collected = await collect(model, make_request("hi"))
            calls = len(server.calls)
    text = "".join(getattr(block, "text", "") for block in collected.message.content)
    return notices, calls, text


@pytest.mark.parametrize("status", [520, 521, 522, 523, 524, 507])
@pytest.mark.parametrize("api", APIS)
async def test_the_default_policy_retries_a_transient_5xx_the_sdks_retry(
    api: str, status: int
) -> None:
    """A Cloudflare 52x (or another 5xx the SDKs retry) is retried, and the retry's
    answer is the stream's."""
    notices, calls, text = await _attempts(api, status)
    assert [(n.status, n.code) for n in notices] == [(status, f"HTTP_{status}")]
    assert (calls, text) == (2, "recovered")


@pytest.mark.parametrize("status", [501, 505])
@pytest.mark.parametrize("api", APIS)
async def test_the_default_policy_leaves_a_5xx_no_retry_mends_final(api: str, status: int) -> None:
    """501 (not implemented) and 505 (HTTP version refused) say the server cannot serve
    this request at all: the error is final, after one call."""
    notices: list[RetryNotice] = []
    script = ScriptedPolicy([_cloudflare(status), MockReply(text="never")])
    with trio.fail_after(DEADLINE):
        async with open_mock_server(script) as server, served_by(api, server) as raw:
            model = manage(raw, retry=RetryPolicy(base_delay=0.0), on_retry=notices.append)
            with pytest.raises(ProviderStatusError) as caught:
                await collect(model, make_request("hi"))
            calls = len(server.calls)
    assert (caught.value.status, caught.value.retryable) == (status, False)
    assert (notices, calls) == ([], 1)


def test_the_default_statuses_are_those_the_sdks_retry_but_501_and_505() -> None:
    """``RetryPolicy().retryable_statuses`` is 408, 409, 429 and 500 to 599 but 501 and 505."""
    expected = {408, 409, 429} | set(range(500, 600))
    assert RetryPolicy().retryable_statuses == expected - {501, 505}


@pytest.mark.parametrize(
    ("statuses", "error", "named"),
    [
        ("503", TypeError, "'503'"),
        (503, TypeError, "503"),
        (None, TypeError, "None"),
        ({429: True}, TypeError, "{429: True}"),
        ([429, "503"], TypeError, "'503'"),
        ([429, True], TypeError, "True"),
        ([429.0], TypeError, "429.0"),
        ([429, 42], ValueError, "42"),
        ([600], ValueError, "600"),
    ],
    ids=[
        "text",
        "one-int",
        "none",
        "mapping",
        "text-item",
        "bool",
        "float",
        "below-100",
        "above-599",
    ],
)
def test_retry_policy_refuses_statuses_that_are_no_http_statuses(
    statuses: Any, error: type[Exception], named: str
) -> None:
    """``retryable_statuses`` holds HTTP statuses: a string (not taken as a set of its
    characters) or an item that is no int from 100 to 599, which no response's status
    would ever equal, is refused naming the field and the value."""
    with pytest.raises(error, match=r"RetryPolicy\.retryable_statuses") as caught:
        RetryPolicy(retryable_statuses=statuses)
    assert named in str(caught.value)


def test_retry_policy_takes_statuses_from_any_collection() -> None:
    """A set, a list, a tuple, a range or a generator of statuses is taken as a set."""
    for statuses in ({429, 503}, [429, 503], (429, 503), range(429, 430), (s for s in [429])):
        assert 429 in RetryPolicy(retryable_statuses=statuses).retryable_statuses


@pytest.mark.parametrize("said", ["True", "1", "yes", ""])
@pytest.mark.parametrize("api", APIS)
async def test_an_x_should_retry_that_says_neither_true_nor_false_leaves_it_to_the_status(
    api: str, said: str, autojump_clock: trio.abc.Clock
) -> None:
    """As the official SDKs read it, only ``x-should-retry: true`` or ``false`` decides;
    a 503 marked with another value is retried as a 503 is, not taken as told not to."""
    notices: list[RetryNotice] = []
    refusal = RawReply(503, (*PLAIN, ("x-should-retry", said)), b"upstream busy")
    server = MockServer(ScriptedPolicy([refusal, MockReply(text="recovered")]))
    with trio.fail_after(60):
        async with mock_adapter(api, server) as raw:
            model = manage(raw, retry=RetryPolicy(base_delay=0.0), on_retry=notices.append)
            collected = await collect(model, make_request("hi"))
    assert [notice.status for notice in notices] == [503]
    assert collected.message.content == (Text("recovered"),)
