"""The mock provider server: fault injection through the adapters, its settings, bodies the
official SDKs parse, listening and timing, and aborts."""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import anthropic
import attrs
import httpx2
import openai
import pytest
import trio

from retinue._content import Text, ToolCall
from retinue.providers import (
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    RateLimitError,
)
from retinue.providers.mock import (
    FAULT_KINDS,
    EchoPolicy,
    Endless,
    Fault,
    FaultKind,
    FaultPolicy,
    MockReply,
    MockServer,
    MockToolCall,
    ScriptedPolicy,
    Timing,
    open_mock_server,
)
from retinue.providers.openai import OpenAIModel

from ._mock_server_kit import APIS, PATHS, REAL_DEADLINE
from .support import collect, make_request, served_by

FAULTS: list[tuple[FaultKind, type[ProviderError], str | None]] = [
    ("rate_limit", RateLimitError, None),
    ("server_error", ProviderStatusError, None),
    ("overloaded", OverloadedError, None),
    ("stream_error", ProviderStreamError, None),
    ("truncated", ProviderConnectionError, "STREAM_TRUNCATED"),
    ("malformed", ProviderStreamError, "MALFORMED_RESPONSE"),
    ("stall", ProviderConnectionError, "TIMEOUT"),
]
STATUS = {"rate_limit": 429, "server_error": 500, "overloaded": 529}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("kind", "error", "code"), FAULTS)
async def test_mock_fault_surfaces_as_typed_retryable_error(
    api: str, kind: FaultKind, error: type[ProviderError], code: str | None
) -> None:
    """Every injected fault reaches the adapter's caller as a typed, retryable error."""
    policy = ScriptedPolicy(
        [Fault(kind, retry_after=1.5, reply=MockReply(text="some words here", chunks=8))]
    )
    # Only the stall waits out the adapter's timeout, so only it gets a short one: on a
    # loaded machine a first response can take longer than that to send its headers.
    timeout = 0.3 if kind == "stall" else REAL_DEADLINE / 2
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(policy) as server,
            served_by(api, server, timeout=timeout) as model,
        ):
            with pytest.raises(error) as caught:
                await collect(model, make_request("hi"))
            assert server.statistics().faults == 1
    failure = caught.value
    assert type(failure) is error
    assert failure.retryable
    assert failure.code
    if code is not None:
        assert failure.code == code
    if kind in STATUS:
        assert failure.status == STATUS[kind]
    if kind == "rate_limit":
        assert failure.retry_after == 1.5


async def test_mock_fault_policy_injects_at_its_rate() -> None:
    """A 30% fault policy faults about 30% of calls, of the kinds asked for, reproducibly."""
    policy = FaultPolicy(EchoPolicy(), rate=0.3, kinds=("rate_limit", "truncated"), seed=7)
    replies = [policy(_call(number)) for number in range(1000)]
    faults = [reply for reply in replies if isinstance(reply, Fault)]
    assert 240 < len(faults) < 360
    assert {fault.kind for fault in faults} == {"rate_limit", "truncated"}
    assert sum(policy.injected.values()) == len(faults)


@pytest.mark.parametrize(
    ("build", "error", "named"),
    [
        (lambda: Endless(-1.0), ValueError, "Endless.interval must be at least 0, not -1.0"),
        (lambda: Endless(math.nan), ValueError, "Endless.interval"),
        (lambda: Endless(lambda rng: rng.uniform(0, 1)), TypeError, "Endless.interval"),  # type: ignore[arg-type]
        (lambda: Timing(latency=-5), ValueError, "Timing.latency"),
        (lambda: Timing(first_token=math.nan), ValueError, "Timing.first_token"),
        (lambda: Timing(inter_chunk="0.1"), TypeError, "Timing.inter_chunk"),  # type: ignore[arg-type]
        (lambda: FaultPolicy(rate=1.5), ValueError, "FaultPolicy.rate"),
        (lambda: FaultPolicy(rate=math.nan), ValueError, "FaultPolicy.rate"),
    ],
    ids=[
        "negative-interval",
        "nan-interval",
        "function-interval",
        "negative-latency",
        "nan-first-token",
        "str-delay",
        "rate-above-1",
        "nan-rate",
    ],
)
def test_mock_settings_no_request_could_use_are_refused_when_built(
    build: Callable[[], object], error: type[Exception], named: str
) -> None:
    """A delay that is no number of seconds, or a fault rate that is no probability, is
    refused naming the setting, not left to fail each request mid-stream (a truncation the
    client cannot tell from an injected one), nor read as 0 without a word. An
    ``Endless`` interval is slept as it is: a function, which a ``Timing`` delay may be,
    is refused, not taken to fail each stream after its first event.
    """
    with pytest.raises(error, match=re.escape(named)):
        build()


def test_mock_delays_may_be_functions_or_never() -> None:
    """A delay drawn per request, or an infinite one (a server that never answers), is taken."""
    Timing(latency=lambda rng: rng.uniform(0, 1), inter_chunk=math.inf)
    Endless(0)
    FaultPolicy(rate=0)
    FaultPolicy(rate=1)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Fault("ratelimit"),  # type: ignore[arg-type]
        lambda: FaultPolicy(EchoPolicy(), kinds=("rate_limit", "ratelimit")),  # type: ignore[arg-type]
        lambda: attrs.evolve(Fault("rate_limit"), kind="ratelimit"),  # type: ignore[arg-type]
    ],
    ids=["fault", "fault policy", "evolved fault"],
)
def test_mock_unknown_fault_kind_is_refused(build: Callable[[], object]) -> None:
    """A misspelt fault kind is a ``ValueError`` naming it and the kinds there are,
    not some other fault injected without a word.
    """
    with pytest.raises(ValueError, match="'ratelimit'") as caught:
        build()
    assert all(kind in str(caught.value) for kind in FAULT_KINDS)


@pytest.mark.parametrize("api", APIS)
async def test_mock_reply_can_report_zero_input_tokens(
    autojump_clock: trio.abc.Clock, api: str
) -> None:
    """``MockReply(input_tokens=0)`` reports no input tokens rather than the estimate."""
    reply = MockReply(text="x", input_tokens=0, output_tokens=0)
    server = MockServer(ScriptedPolicy([reply]))
    body: dict[str, Any] = {"model": "m", "max_tokens": 10, "input": "hi" * 100}
    body["messages"] = [{"role": "user", "content": body["input"]}]
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post(f"http://mock{PATHS[api]}", json=body)
    usage = response.json()["usage"]
    assert usage["prompt_tokens" if api == "chat" else "input_tokens"] == 0


def _call(number: int) -> Any:
    from retinue.providers.mock import MockCall

    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    # the same request again and again, as the server numbers repeats of one body
    return MockCall("chat", body, {}, number, occurrence=number)


# The SDKs' own stream readers leave async generators to the garbage collector
# (one reason the adapters read the raw stream); trio reports that as a warning.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("api", APIS)
async def test_mock_renders_bodies_the_official_sdks_parse(api: str) -> None:
    """The SDKs' own parsers accept the mock's streaming and non-streaming bodies."""
    reply = MockReply(text="hello world", tool_calls=(MockToolCall("lookup", '{"city": "Oslo"}'),))
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(ScriptedPolicy([reply], cycle=True)) as server:
            if api == "messages":
                await _anthropic_sdk_round_trip(server)
            else:
                await _openai_sdk_round_trip(server, api)


async def _openai_sdk_round_trip(server: MockServer, api: str) -> None:
    async with openai.AsyncOpenAI(
        base_url=server.openai_base_url, api_key="k", max_retries=0
    ) as client:
        if api == "chat":
            messages: Any = [{"role": "user", "content": "hi"}]
            done = await client.chat.completions.create(model="m", messages=messages)
            assert done.choices[0].message.content == "hello world"
            assert done.choices[0].message.tool_calls[0].function.name == "lookup"  # type: ignore[index, union-attr]
            stream = await client.chat.completions.create(model="m", messages=messages, stream=True)
            parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
            assert "".join(parts) == "hello world"
        else:
            response = await client.responses.create(model="m", input="hi")
            assert response.output_text == "hello world"
            events = [
                event.type
                async for event in await client.responses.create(model="m", input="hi", stream=True)
            ]
            assert events[-1] == "response.completed"


async def _anthropic_sdk_round_trip(server: MockServer) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=server.base_url, api_key="k", max_retries=0
    ) as client:
        messages: Any = [{"role": "user", "content": "hi"}]
        message = await client.messages.create(model="m", max_tokens=10, messages=messages)
        assert [block.type for block in message.content] == ["text", "tool_use"]
        async with client.messages.stream(model="m", max_tokens=10, messages=messages) as stream:
            final = await stream.get_final_message()
        assert final.content[1].input == {"city": "Oslo"}  # type: ignore[union-attr]
        assert final.stop_reason == "tool_use"


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    ("host", "url_host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "127.0.0.1"),  # every interface: reached on the loopback
        pytest.param(
            "::1",
            "[::1]",
            marks=pytest.mark.skipif(
                not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)"
            ),
        ),
    ],
)
async def test_mock_base_url_names_the_address_it_listens_on(host: str, url_host: str) -> None:
    """``base_url`` is the address bound, an IPv6 one bracketed, the wildcard's loopback
    for every interface; an SDK pointed at it is served.
    """
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(host=host) as server:
            assert re.fullmatch(rf"http://{re.escape(url_host)}:[0-9]+", server.base_url)
            async with openai.AsyncOpenAI(
                base_url=server.openai_base_url, api_key="k", max_retries=0
            ) as client:
                done = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
    assert (done.choices[0].message.content or "").startswith("You said: hi")


async def test_mock_latency_and_chunk_timing_apply() -> None:
    """Latency delays the headers and inter-chunk delay spaces the events (real clock)."""
    timing = Timing(latency=0.1, first_token=0.05, inter_chunk=0.02)
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(EchoPolicy(chunks=5), timing=timing) as server,
            served_by("chat", server) as model,
        ):
            start = trio.current_time()
            await collect(model, make_request("hi"))
            elapsed = trio.current_time() - start
    assert elapsed >= 0.1 + 0.05 + 0.02 * 5


@pytest.mark.parametrize("api", APIS)
async def test_mock_streams_scripted_non_json_arguments_verbatim(api: str) -> None:
    """R10.2: arguments that are not JSON reach the client as the raw text the script gave."""
    reply = MockReply(tool_calls=(MockToolCall("lookup", '{"city": "Os', id="call_1"),))
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([reply])) as server,
            served_by(api, server) as model,
        ):
            collected = await collect(model, make_request("hi"))
    assert collected.message.content == (ToolCall("call_1", "lookup", '{"city": "Os'),)


async def test_mock_render_failure_answers_500_and_keeps_serving() -> None:
    """A reply the mock cannot render fails its own request with HTTP 500; the server lives on."""
    call = MockToolCall("lookup", "{}")
    # A value no reply can be built with, set past the checks: the render fails.
    object.__setattr__(call, "arguments", None)
    broken = MockReply(tool_calls=(call,))
    policy = ScriptedPolicy([broken, MockReply(text="still here")])
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(policy) as server, served_by("messages", server) as model:
            with pytest.raises(ProviderStatusError) as caught:
                await collect(model, make_request("hi"))
            second = await collect(model, make_request("hi"))
    assert caught.value.status == 500
    assert "could not render" in str(caught.value)
    assert second.message.content == (Text("still here"),)


async def _until(condition: Callable[[], bool]) -> None:
    """Poll the server's statistics (a snapshot API, on the real clock) until *condition* holds."""
    while not condition():  # noqa: ASYNC110 - statistics() is a snapshot, not an event
        await trio.sleep(0.01)


@pytest.mark.parametrize("api", APIS)
async def test_adapter_abort_closes_the_connection_promptly(api: str) -> None:
    """Abandoning a stream that never ends closes its TCP connection at once."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([Endless(0.01)])) as server,
            served_by(api, server) as model,
        ):
            with trio.move_on_after(0.3):
                await collect(model, make_request("hi"))
            aborted_at = trio.current_time()
            await _until(lambda: server.statistics().streams_aborted > 0)
            assert trio.current_time() - aborted_at < 0.5
            stats = server.statistics()
            assert (stats.streams_started, stats.streams_completed) == (1, 0)
            await _until(lambda: server.statistics().connections_open == 0)


async def test_adapter_abort_is_prompt_on_the_virtual_clock(autojump_clock: trio.abc.Clock) -> None:
    """In-process, cancelling an endless stream closes it with no virtual time passing."""
    server = MockServer(ScriptedPolicy([Endless(0.5)]))
    chunks = 0
    with trio.fail_after(60):
        async with OpenAIModel(transport=server.transport(), base_url="http://mock/v1") as model:
            with trio.move_on_after(10.0):
                async with aclosing(model.stream(make_request("hi"))) as stream:
                    async for _ in stream:
                        chunks += 1
            assert trio.current_time() == pytest.approx(10.0)
            assert server.statistics().streams_aborted == 1
    assert chunks >= 15


async def test_open_mock_server_on_a_port_in_use_raises_the_os_error_itself() -> None:
    """An address it cannot listen on is an ``OSError`` a caller can catch as one, not
    one wrapped in an exception group."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError, match="in use"):
            async with open_mock_server(port=busy.getsockname()[1]):
                pytest.fail("the server listened")  # pragma: no cover - refused before


@pytest.mark.parametrize("api", APIS)
async def test_streams_a_closing_server_cuts_short_are_counted_truncated(api: str) -> None:
    """Leaving ``open_mock_server`` while streams are in flight ends each one for its client
    with a retryable connection error, and the statistics count each stream begun once,
    as truncated: the server cut it, the client did not abandon it.
    """
    count = 4
    failures: list[ProviderConnectionError] = []

    async def one(model: Any, number: int) -> None:
        try:
            await collect(model, make_request(f"hi {number}"))
        except ProviderConnectionError as error:
            failures.append(error)

    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            async with open_mock_server(ScriptedPolicy([Endless(0.01)], cycle=True)) as server:
                model = served_by(api, server)
                for number in range(count):
                    nursery.start_soon(one, model, number)
                await _until(lambda: server.statistics().streams_started == count)
            await _until(lambda: len(failures) == count)
            await model.aclose()
    assert all(error.retryable for error in failures)
    stats = server.statistics()
    assert (stats.streams_started, stats.streams_truncated) == (count, count)
    assert (stats.streams_completed, stats.streams_aborted, stats.connections_open) == (0, 0, 0)
