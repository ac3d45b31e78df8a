"""The HTTP life of a response and of an adapter: body decoding, draining, closing.

Every body is served by the in-process mock server, so the adapters read it
through their real HTTP path.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
import trio

from retinue._content import Text
from retinue._stream import Finish
from retinue.providers import (
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    RetryPolicy,
    manage,
)
from retinue.providers._http import DRAIN_SECONDS
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import (
    MockServer,
    RawReply,
    ScriptedPolicy,
    Timing,
    open_mock_server,
)
from retinue.providers.openai import OpenAIModel
from tests.helpers import ANTHROPIC_CREDENTIAL_VARIABLES

from .support import BrokenErrorBody, collect, make_request, served_by

SSE = (("content-type", "text/event-stream"),)
JSON = (("content-type", "application/json"),)
KEEP_ALIVE = b": keep-alive\n\n"
"""A comment a proxy may send after the terminal event, before it ends the body."""

CHAT_EVENTS = [
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n',
    b"data: [DONE]\n\n",
]


def _anthropic_event(payload: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (payload["type"].encode(), json.dumps(payload).encode())


MESSAGES_EVENTS = [
    _anthropic_event(payload)
    for payload in (
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    )
]
EVENTS = {"chat": CHAT_EVENTS, "messages": MESSAGES_EVENTS}


def _adapter(api: str, transport: httpx2.AsyncBaseTransport) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(transport=transport, base_url="http://mock", api_key="k")
    return OpenAIModel(transport=transport, base_url="http://mock/v1", api_key="k")


def _not_gzip(content_type: str) -> RawReply:
    """A body that says it is gzip but is not, as a broken proxy or cache may send."""
    headers = (("content-type", content_type), ("content-encoding", "gzip"))
    return RawReply(200, headers, b"this is not gzip data\n\n" * 8)


BOTH_SDKS = pytest.mark.parametrize("api", ["chat", "messages"])
CONTENT_TYPES = pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
REAL_DEADLINE = 10.0


@BOTH_SDKS
@CONTENT_TYPES
async def test_undecodable_body_raises_a_retryable_connection_error(
    api: str, content_type: str
) -> None:
    """R10.3: a body that fails content decoding raises a typed, retryable provider error."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([_not_gzip(content_type)])) as server,
            served_by(api, server) as model,
        ):
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    assert caught.value.code == "CONNECTION_ERROR"
    assert caught.value.retryable
    assert isinstance(caught.value.__cause__, httpx2.DecodingError)


@BOTH_SDKS
@CONTENT_TYPES
async def test_undecodable_body_is_retried(api: str, content_type: str) -> None:
    """R10.3: a corrupt body is retried like a dropped connection; the next attempt succeeds."""
    good = RawReply(200, SSE, b"".join(EVENTS[api]))
    policy = ScriptedPolicy([_not_gzip(content_type), good])
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(policy) as server, served_by(api, server) as model:
            managed = manage(model, retry=RetryPolicy(max_attempts=2, base_delay=0.0))
            collected = await collect(managed, make_request("hi"))
    assert collected.message.content == (Text("hi"),)
    assert managed.statistics().retries == 1


@BOTH_SDKS
async def test_finish_is_not_held_back_by_a_body_left_open(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: the closing chunks go out when the terminal event arrives, even if the
    server keeps the body open after it; the wait for the body's end stays bounded.
    """
    step = 10 * DRAIN_SECONDS
    events = EVENTS[api]
    server = MockServer(
        ScriptedPolicy([RawReply(200, SSE, b"".join(events) + KEEP_ALIVE)]),
        timing=Timing(inter_chunk=step),
    )
    terminal_at = (len(events) - 1) * step
    finished_at = None
    with trio.fail_after(10 * step):
        async with _adapter(api, server.transport()) as model:
            async with aclosing(model.stream(make_request("hi"))) as stream:
                async for chunk in stream:
                    if isinstance(chunk, Finish):
                        finished_at = trio.current_time()
            ended_at = trio.current_time()
    assert finished_at == pytest.approx(terminal_at)
    assert ended_at <= terminal_at + DRAIN_SECONDS


@BOTH_SDKS
@pytest.mark.parametrize("stop_at_finish", [False, True], ids=["to-end", "stop-at-finish"])
async def test_body_is_read_to_its_end_after_the_terminal_event(
    api: str, stop_at_finish: bool, autojump_clock: trio.abc.Clock
) -> None:
    """R10.2: a body that ends soon after its terminal event is read to the end (so the
    connection can be reused), also when the consumer stops at the finish chunk.
    """
    server = MockServer(
        ScriptedPolicy([RawReply(200, SSE, b"".join(EVENTS[api]) + KEEP_ALIVE)]),
        timing=Timing(inter_chunk=DRAIN_SECONDS / 4),
    )
    with trio.fail_after(60):
        async with (
            _adapter(api, server.transport()) as model,
            aclosing(model.stream(make_request("hi"))) as stream,
        ):
            async for chunk in stream:
                if stop_at_finish and isinstance(chunk, Finish):
                    break
    statistics = server.statistics()
    assert (statistics.streams_completed, statistics.streams_aborted) == (1, 0)


class _RecordingTransport(httpx2.AsyncBaseTransport):
    """The mock server's transport, noting whether it was closed; closing may hang."""

    def __init__(self, server: MockServer, *, hang_on_close: bool = False) -> None:
        self._inner = server.transport()
        self._hang_on_close = hang_on_close
        self.closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        self.closed = True
        if self._hang_on_close:
            await trio.sleep_forever()
        await self._inner.aclose()


@BOTH_SDKS
async def test_leaving_the_adapter_while_cancelled_closes_it(api: str) -> None:
    """R12.9, §17 "Shield the close path": an adapter left during cancellation (shutdown,
    a timeout) still closes its client and refuses further requests; the cancellation
    goes on.
    """
    transport = _RecordingTransport(MockServer())
    model = _adapter(api, transport)
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with model:
                scope.cancel()
        assert scope.cancelled_caught
        assert transport.closed
        with pytest.raises(ProviderError) as caught:
            await collect(model, make_request("hi"))
    assert caught.value.code == "ADAPTER_CLOSED"


@BOTH_SDKS
async def test_closing_while_cancelled_is_bounded(api: str, autojump_clock: trio.abc.Clock) -> None:
    """R12.9, §17 "Shield the close path": the shielded close of a cancelled adapter
    gives up after a short deadline when the pools do not close.
    """
    transport = _RecordingTransport(MockServer(), hang_on_close=True)
    with trio.fail_after(60):
        with trio.CancelScope() as scope:
            async with _adapter(api, transport):
                scope.cancel()
    assert scope.cancelled_caught
    assert transport.closed
    assert trio.current_time() <= 1.0


def _error_then_answer(api: str, status: int, failure: Exception | None) -> httpx2.MockTransport:
    """A transport answering *status* with a broken body first, then a whole stream."""
    answers = [
        httpx2.Response(status, headers=JSON, stream=BrokenErrorBody(failure)),
        httpx2.Response(200, headers=SSE, content=b"".join(EVENTS[api])),
    ]

    async def handler(request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        return answers.pop(0)

    return httpx2.MockTransport(handler)


OVERLOADED = {"chat": 503, "messages": 529}


@BOTH_SDKS
async def test_error_status_whose_body_breaks_raises_its_typed_status_error(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a 503/529 whose body fails to arrive whole raises the typed, retryable status
    error (the SDK reads that body outside its own error handling), and is retried.
    """
    peer_closed = httpx2.RemoteProtocolError("peer closed connection")
    transport = _error_then_answer(api, OVERLOADED[api], peer_closed)
    with trio.fail_after(60):
        async with _adapter(api, transport) as model:
            with pytest.raises(OverloadedError) as caught:
                await collect(model, make_request("hi"))
            assert caught.value.status == OVERLOADED[api]
            assert caught.value.retryable
            assert "peer closed" in str(caught.value)
    transport = _error_then_answer(api, OVERLOADED[api], peer_closed)
    with trio.fail_after(60):
        async with _adapter(api, transport) as model:
            managed = manage(model, retry=RetryPolicy(max_attempts=2))
            collected = await collect(managed, make_request("hi"))
    assert collected.message.content == (Text("hi"),)


@BOTH_SDKS
async def test_error_status_with_an_undecodable_body_raises_its_typed_status_error(
    api: str,
) -> None:
    """R10.3: an error status whose body fails content decoding keeps its status."""
    headers = (("content-type", "application/json"), ("content-encoding", "gzip"))
    bad = RawReply(OVERLOADED[api], headers, b"this is not gzip data\n\n" * 8)
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([bad])) as server,
            served_by(api, server) as model,
        ):
            with pytest.raises(OverloadedError) as caught:
                await collect(model, make_request("hi"))
    assert (caught.value.status, caught.value.retryable) == (OVERLOADED[api], True)


@BOTH_SDKS
async def test_error_status_whose_body_stalls_names_its_status(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a 500 whose body never comes is that status's error once the timeout passes,
    not "no response headers".
    """
    transport = _error_then_answer(api, 500, None)
    if api == "messages":
        model: OpenAIModel | AnthropicModel = AnthropicModel(
            transport=transport, base_url="http://mock", api_key="k", timeout=3.0
        )
    else:
        model = OpenAIModel(
            transport=transport, base_url="http://mock/v1", api_key="k", timeout=3.0
        )
    with trio.fail_after(60):
        async with model:
            with pytest.raises(ProviderStatusError) as caught:
                await collect(model, make_request("hi"))
    assert (caught.value.status, caught.value.retryable) == (500, True)
    assert "500" in str(caught.value)
    assert "3.0 s" in str(caught.value)
    assert trio.current_time() == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("variables", "options", "found"),
    [
        ({}, {}, False),
        ({}, {"api_key": "k"}, True),
        ({"ANTHROPIC_API_KEY": "k"}, {}, True),
        ({"ANTHROPIC_AUTH_TOKEN": "token"}, {}, True),
        ({"ANTHROPIC_PROFILE": "dev"}, {}, True),
        ({}, {"base_url": "http://127.0.0.1:9"}, True),
        ({}, {"base_url": "https://api.anthropic.com"}, False),
        ({}, {"base_url": "https://eu.api.anthropic.com/"}, False),
    ],
    ids=[
        "nothing",
        "key",
        "key-variable",
        "token-variable",
        "profile",
        "local-server",
        "anthropic-by-url",
        "anthropic-region-by-url",
    ],
)
async def test_anthropic_model_says_whether_its_client_found_credentials(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    variables: dict[str, str],
    options: dict[str, Any],
    found: bool,
) -> None:
    """The SDK settles its credentials when built but refuses only per request; the adapter
    reports what its client found (a local server gets a placeholder key, Anthropic's own
    API named by its URL none).
    """
    for name in ANTHROPIC_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk but the one below
    profile = tmp_path / ".config" / "anthropic" / "configs" / "dev.json"
    profile.parent.mkdir(parents=True)
    profile.write_text('{"authentication": {"type": "user_oauth"}}')
    profile.chmod(0o600)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    async with AnthropicModel(**options) as model:
        assert model.has_credentials is found


OPENAI_CREDENTIAL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_BASE_URL")


@pytest.mark.parametrize(
    ("variables", "options", "found"),
    [
        ({}, {}, False),
        ({}, {"api_key": "k"}, True),
        ({"OPENAI_API_KEY": "k"}, {}, True),
        ({"OPENAI_ADMIN_KEY": "admin"}, {}, False),
        ({}, {"base_url": "http://127.0.0.1:9/v1"}, True),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, {}, True),
        ({}, {"base_url": "https://api.openai.com/v1"}, False),
        ({"OPENAI_BASE_URL": "https://api.openai.com/v1"}, {}, False),
        ({}, {"base_url": "https://eu.api.openai.com/v1"}, False),
    ],
    ids=[
        "nothing",
        "key",
        "key-variable",
        "admin-key-only",
        "local-server",
        "url-variable",
        "openai-by-url",
        "openai-by-url-variable",
        "openai-region-by-url",
    ],
)
async def test_openai_model_builds_without_credentials_and_says_whether_it_has_them(
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    options: dict[str, Any],
    found: bool,
) -> None:
    """As with Anthropic, a missing key does not stop the adapter being built: it reports
    it, so a caller can refuse to start. An admin key authenticates no model request, and
    OpenAI's own API named by its URL gets no placeholder key.
    """
    for name in OPENAI_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    async with OpenAIModel(**options) as model:
        assert model.has_credentials is found


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("variables", [{}, {"OPENAI_ADMIN_KEY": "admin"}], ids=["none", "admin"])
async def test_openai_request_without_a_key_fails_typed_and_names_the_key(
    monkeypatch: pytest.MonkeyPatch,
    api: Literal["chat", "responses"],
    variables: dict[str, str],
    autojump_clock: trio.abc.Clock,
) -> None:
    """A request from an adapter without a key fails before anything is sent, with a
    non-retryable ``ProviderError`` coded ``MISSING_CREDENTIALS`` that names
    ``OPENAI_API_KEY``, not an exception of the SDK's own.
    """
    for name in OPENAI_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    with trio.fail_after(5):
        async with OpenAIModel(api=api, transport=httpx2.MockTransport(handler)) as model:
            with pytest.raises(ProviderError) as caught:
                await collect(model, make_request("hi"))
    assert (caught.value.code, caught.value.retryable) == ("MISSING_CREDENTIALS", False)
    assert "OPENAI_API_KEY" in str(caught.value)
    assert sent == []


async def test_anthropic_request_without_credentials_fails_as_openai_one_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Like OpenAI's, an Anthropic request without credentials fails before anything is
    sent, coded ``MISSING_CREDENTIALS`` and naming ``ANTHROPIC_API_KEY``."""
    for name in ANTHROPIC_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    with trio.fail_after(5):
        async with AnthropicModel(transport=httpx2.MockTransport(handler)) as model:
            assert not model.has_credentials
            with pytest.raises(ProviderError) as caught:
                await collect(model, make_request("hi"))
    assert (caught.value.code, caught.value.retryable) == ("MISSING_CREDENTIALS", False)
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert sent == []


class _StallingBody(httpx2.AsyncByteStream):
    """A 200 body whose first bytes come, then nothing more."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"choices":[{"ind'
        await trio.sleep_forever()


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_whole_body_that_stalls_times_out_as_a_stream_does(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a whole JSON answer (a server that ignored ``stream``) whose body stops
    arriving fails once the timeout passes, coded ``TIMEOUT`` and retryable, as a stalled
    event stream does, never waiting for ever.
    """

    async def handler(request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        return httpx2.Response(200, headers=JSON, stream=_StallingBody())

    transport = httpx2.MockTransport(handler)
    if api == "messages":
        model: OpenAIModel | AnthropicModel = AnthropicModel(
            transport=transport, base_url="http://mock", api_key="k", timeout=3.0
        )
    else:
        model = OpenAIModel(
            transport=transport,
            base_url="http://mock/v1",
            api_key="k",
            api=api,  # type: ignore[arg-type]
            timeout=3.0,
        )
    with trio.fail_after(60):
        async with model:
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    assert (caught.value.code, caught.value.retryable) == ("TIMEOUT", True)
    assert trio.current_time() == pytest.approx(3.0)
