"""The mock server under abuse: bad requests and replies fail alone, faults keep their shape.

A body past its limit or a request missing a required field is answered as the real
API answers it, stream faults on calls that did not ask for a stream, truncation and
``Retry-After`` keep their shape, and a client waiting for ``100 Continue`` gets one.
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx2
import openai
import pytest
import trio

from retinue.providers import ProviderConnectionError, ProviderStatusError
from retinue.providers.mock import (
    EchoPolicy,
    Endless,
    Fault,
    FaultKind,
    FaultPolicy,
    MockCall,
    MockReply,
    MockResponse,
    MockServer,
    Policy,
    RawReply,
    ReplayPolicy,
    ScriptedPolicy,
    Timing,
    _server as mock_server,
    open_mock_server,
)
from retinue.providers.openai import OpenAIModel

from ._mock_robustness_kit import CHAT, REAL_DEADLINE, chat_body
from .support import collect, make_request

MAX_NESTING = 128
"""How deep a body may nest arrays and objects, as the mock server's documentation says."""


def _request(
    body: bytes = b"", path: str = CHAT, method: str = "POST", extra: bytes = b""
) -> bytes:
    """A raw HTTP/1.1 request that asks the server to close the connection after it."""
    head = f"{method} {path} HTTP/1.1\r\nhost: mock\r\nconnection: close\r\n".encode()
    return head + extra + f"content-length: {len(body)}\r\n\r\n".encode() + body


async def _read_all(stream: trio.SocketStream) -> bytes:
    data = b""
    try:
        while part := await stream.receive_some(65536):
            data += part
    except trio.BrokenResourceError:
        pass
    return data


async def _raw(port: int, request: bytes) -> bytes:
    """Send *request* on a new connection; everything the server sent until it closed."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        return await _read_all(stream)


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _payload(response: bytes) -> bytes:
    return response.partition(b"\r\n\r\n")[2]


def _port(server: MockServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


async def _survives(policy: Policy, request: bytes, **options: Any) -> tuple[bytes, MockServer]:
    """Send *request* while another client holds an idle connection; that client still gets served."""
    async with open_mock_server(policy, **options) as server:
        bystander = await trio.open_tcp_stream("127.0.0.1", _port(server))
        async with bystander:
            response = await _raw(_port(server), request)
            await bystander.send_all(_request(chat_body(), "/v1/messages"))
            after = await _read_all(bystander)
        assert _status(after) != 0
        assert b"HTTP/1.1" in after
    return response, server


# -- 1. one bad request or reply fails alone ------------------------------------------

_UNHASHABLE_REQUIRED = {
    "type": "function",
    "function": {
        "name": "t",
        "parameters": {"type": "object", "properties": {"a": {}}, "required": [["a"]]},
    },
}


def _nested_content(depth: int) -> bytes:
    """A chat body whose message content is lists nested until the body is *depth* deep."""
    lists = depth - 3  # under the body, its messages and a message
    return (
        b'{"model":"m","messages":[{"role":"user","content":'
        + b"[" * lists
        + b'"x"'
        + b"]" * lists
        + b"}]}"
    )


BAD_REQUESTS = {
    "head": (_request(method="HEAD"), 405),
    "non-utf8 header": (_request(chat_body(), extra=b"x-note: caf\xe9\r\n"), 200),
    "deep json": (_request(b"[" * 100_000 + b"]" * 100_000), 400),
    # json.loads reads this one; walking it recursively would not
    "deep json that parses": (_request(_nested_content(600)), 400),
    "json as deep as allowed": (_request(_nested_content(MAX_NESTING)), 200),
    "json one level deeper": (_request(_nested_content(MAX_NESTING + 1)), 400),
    "empty body": (_request(b""), 400),
    "list in required": (_request(chat_body(tools=[_UNHASHABLE_REQUIRED])), 200),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
async def test_mock_bad_request_fails_alone(case: str) -> None:
    """A request the server cannot take gets its own answer; other connections are served."""
    request, status = BAD_REQUESTS[case]
    with trio.fail_after(REAL_DEADLINE):
        response, _ = await _survives(EchoPolicy(), request)
    assert _status(response) == status
    if case == "head":
        assert _payload(response) == b""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not valid JSON"),
        (b"{not json", "not valid JSON"),
        (_nested_content(600), "nested too deeply"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
    ids=["empty", "not json", "deep", "deeper than the parser goes"],
)
@pytest.mark.parametrize("path", [CHAT, "/v1/responses", "/v1/messages"])
async def test_mock_invalid_body_gets_a_400_in_the_api_shape(
    autojump_clock: trio.abc.Clock, path: str, body: bytes, message: str
) -> None:
    """A body that is empty, not JSON or nested too deeply gets a 400 shaped like the
    API's errors, saying which.
    """
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post(f"http://mock{path}", content=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert message in error["message"]


def _failing_policy(_call: MockCall) -> MockResponse:
    raise RuntimeError("policy bug")


@pytest.mark.parametrize(
    ("path", "shape"), [(CHAT, "error"), ("/v1/responses", "error"), ("/v1/messages", "type")]
)
async def test_mock_policy_that_raises_answers_500_in_the_api_shape(path: str, shape: str) -> None:
    """A policy that raises fails its request with a JSON 500 shaped like the API's errors."""
    with trio.fail_after(REAL_DEADLINE):
        response, server = await _survives(_failing_policy, _request(chat_body(), path))
    assert _status(response) == 500
    error = json.loads(_payload(response))
    assert shape in error
    assert "policy bug" in json.dumps(error)
    assert server.statistics().requests == 2


@pytest.mark.parametrize("framing", [("content-length", "999"), ("transfer-encoding", "gzip")])
async def test_mock_raw_reply_framing_headers_are_replaced(framing: tuple[str, str]) -> None:
    """A raw reply's own framing headers are dropped; the server frames the body itself."""
    raw = RawReply(200, (("content-type", "application/json"), framing), b'{"ok":true}')
    with trio.fail_after(REAL_DEADLINE):
        response, _ = await _survives(ReplayPolicy([raw]), _request(chat_body()))
    assert framing not in raw.headers
    assert _status(response) == 200
    assert _payload(response) == b'{"ok":true}'


@pytest.mark.parametrize("name", ["content-type", "Content-Type", "CONTENT-TYPE"])
async def test_mock_raw_reply_streams_whatever_the_case_of_its_header_names(name: str) -> None:
    """A raw event stream is sent as a stream (chunked, paced by the timing) whatever the
    case of ``Content-Type``: with capitals it does not go out in one piece, as a JSON body."""
    body = b'data: {"choices":[]}\n\ndata: [DONE]\n\n'
    raw = RawReply(200, ((name, "text/event-stream"),), body)
    with trio.fail_after(REAL_DEADLINE):
        response, _ = await _survives(ReplayPolicy([raw]), _request(chat_body()))
    head = response.split(b"\r\n\r\n", 1)[0].lower()
    assert b"transfer-encoding: chunked" in head
    assert b"content-length" not in head


async def test_mock_request_body_past_its_limit_is_answered_413_in_the_api_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body past the limit (Anthropic's 32 MiB) is answered 413 in the API's shape, as the
    real APIs answer, over a socket (the connection still serving) and in process alike;
    it never reaches the policy to be answered 200."""
    monkeypatch.setattr(mock_server, "MAX_REQUEST_BYTES", 1024)
    large = chat_body(padding="x" * 2048)
    expected = {
        "type": "request_too_large",
        "message": "the request body is larger than 1024 bytes",
    }
    with trio.fail_after(REAL_DEADLINE):
        response, server = await _survives(EchoPolicy(), _request(large, "/v1/messages"))
        assert _status(response) == 413
        assert json.loads(_payload(response))["error"] == expected
        in_process = MockServer(EchoPolicy())
        async with httpx2.AsyncClient(transport=in_process.transport()) as client:
            answer = await client.post("http://mock/v1/messages", content=large)
    assert (answer.status_code, answer.json()["error"]) == (413, expected)
    assert (len(server.calls), len(in_process.calls)) == (1, 0)  # only the bystander's


def _fails_on_third_draw() -> Timing:
    draws = iter(range(100))

    def delay(_rng: random.Random) -> float:
        if next(draws) == 2:
            raise ZeroDivisionError("bad distribution")
        return 0.0

    return Timing(inter_chunk=delay)


async def test_mock_timing_failure_mid_stream_closes_only_that_connection() -> None:
    """A timing function that raises mid-stream cuts that stream; the server serves on."""
    policy = ScriptedPolicy([MockReply(text="hello world", chunks=4)], cycle=True)
    with trio.fail_after(REAL_DEADLINE):
        response, server = await _survives(
            policy, _request(chat_body(stream=True)), timing=_fails_on_third_draw()
        )
    assert _status(response) == 200
    assert not response.endswith(b"0\r\n\r\n")  # no final chunk: the body was cut
    stats = server.statistics()
    assert stats.streams_completed == 0
    assert stats.streams_truncated == 1


async def test_mock_timing_failure_before_the_reply_answers_500() -> None:
    """A latency draw that raises fails its request with a 500."""
    timing = Timing(latency=lambda _rng: 1 / 0)
    with trio.fail_after(REAL_DEADLINE):
        response, _ = await _survives(EchoPolicy(), _request(chat_body()), timing=timing)
    assert _status(response) == 500


async def test_mock_in_process_failures_reach_the_client_as_http_errors(
    autojump_clock: trio.abc.Clock,
) -> None:
    """In-process too, a raising policy is a 500 and a failing stream a cut connection."""
    server = MockServer(_failing_policy)
    with trio.fail_after(60):
        async with OpenAIModel(transport=server.transport(), base_url="http://mock/v1") as model:
            with pytest.raises(ProviderStatusError) as caught:
                await collect(model, make_request("hi"))
            assert caught.value.status == 500
            server.policy = ScriptedPolicy([MockReply(text="hello world")])
            server.timing = _fails_on_third_draw()
            with pytest.raises(ProviderConnectionError):
                await collect(model, make_request("hi"))
    assert server.statistics().streams_truncated == 1


# -- 4. stream faults on calls that did not ask for a stream ----------------------------


def _fault_server(kind: FaultKind) -> MockServer:
    return MockServer(FaultPolicy(EchoPolicy(), rate=1.0, kinds=(kind,)))


async def test_mock_stream_error_without_stream_is_a_500(autojump_clock: trio.abc.Clock) -> None:
    """The official SDK sees a ``stream_error`` on a plain call as a server error."""
    server = _fault_server("stream_error")
    async with openai.AsyncOpenAI(
        base_url="http://m/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=server.transport()),
    ) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.status_code == 500


async def test_mock_malformed_without_stream_is_invalid_json(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A ``malformed`` plain call gets a JSON content type and a body that is not JSON."""
    server = _fault_server("malformed")
    async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
        response = await client.post("/v1/messages", content=chat_body())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    with pytest.raises(ValueError):
        json.loads(response.content)


@pytest.mark.parametrize("response", [Endless(0.1), Fault("stall")], ids=["endless", "stall"])
async def test_mock_endless_without_stream_stalls(
    response: MockResponse, autojump_clock: trio.abc.Clock
) -> None:
    """A plain call answered by ``Endless`` or ``stall`` gets JSON headers, then no whole body."""
    server = MockServer(ScriptedPolicy([response]))
    received = b""
    async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
        with trio.move_on_after(30) as waited:
            async with client.stream("POST", CHAT, content=chat_body()) as streamed:
                assert streamed.headers["content-type"] == "application/json"
                async for part in streamed.aiter_bytes():
                    received += part
    assert waited.cancelled_caught
    if isinstance(response, Endless):
        assert received == b""
    else:
        with pytest.raises(ValueError):
            json.loads(received)


# -- 5. and 6. truncation is not completion; Retry-After rounds up ----------------------


async def test_mock_truncated_stream_is_not_counted_completed() -> None:
    """A ``truncated`` fault counts as a truncated stream, over TCP and in-process."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(ScriptedPolicy([Fault("truncated")])) as server:
            async with OpenAIModel(base_url=server.openai_base_url, api_key="k") as model:
                with pytest.raises(ProviderConnectionError):
                    await collect(model, make_request("hi"))
            tcp = server.statistics()
        local = MockServer(ScriptedPolicy([Fault("truncated")]))
        async with OpenAIModel(transport=local.transport(), base_url="http://m/v1") as model:
            with pytest.raises(ProviderConnectionError):
                await collect(model, make_request("hi"))
    for stats in (tcp, local.statistics()):
        assert (stats.streams_started, stats.streams_completed) == (1, 0)
        assert stats.streams_truncated == 1


@pytest.mark.parametrize(
    ("seconds", "header", "header_ms"),
    [
        (0.4, "1", "400"),
        (1.6, "2", "1600"),
        (2.5, "3", "2500"),
        (2.0, "2", "2000"),
        (1.005, "2", "1005"),  # 1.005 * 1000 is 1004.9999999999999
        (2.007, "3", "2007"),  # 2.007 * 1000 is 2007.0000000000002
        (0.0004, "1", "1"),
    ],
)
async def test_mock_retry_after_rounds_up(seconds: float, header: str, header_ms: str) -> None:
    """``Retry-After`` (whole seconds) and ``retry-after-ms`` are never earlier than the
    fault's ``retry_after``, as written: milliseconds are rounded up too, not down.
    """
    server = MockServer(ScriptedPolicy([Fault("rate_limit", retry_after=seconds)]))
    async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
        response = await client.post(CHAT, content=chat_body())
    assert response.status_code == 429
    assert response.headers["retry-after"] == header
    assert response.headers["retry-after-ms"] == header_ms


# -- 10. Expect: 100-continue ------------------------------------------------------------


async def test_mock_answers_expect_100_continue() -> None:
    """A client that waits for ``100 Continue`` before its body gets one."""
    body = chat_body()
    head = _request(body, extra=b"expect: 100-continue\r\n")[: -len(body)]
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server:
            stream = await trio.open_tcp_stream("127.0.0.1", _port(server))
            async with stream:
                await stream.send_all(head)
                interim = await stream.receive_some(65536)
                await stream.send_all(body)
                final = await _read_all(stream)
    assert interim.startswith(b"HTTP/1.1 100")
    assert _status(final) == 200


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (CHAT, {"model": "m"}, "Missing required parameter: 'messages'."),
        (CHAT, {"messages": []}, "Missing required parameter: 'model'."),
        (CHAT, {"model": None, "messages": []}, "Missing required parameter: 'model'."),
        ("/v1/responses", {"input": "hi"}, "Missing required parameter: 'model'."),
        (
            "/v1/messages",
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            "max_tokens: Field required",
        ),
    ],
    ids=[
        "chat-messages",
        "chat-model",
        "chat-null-model",
        "responses-model",
        "messages-max-tokens",
    ],
)
async def test_mock_request_without_a_required_field_is_answered_400_naming_it(
    path: str, body: dict[str, Any], message: str
) -> None:
    """A request the real API refuses for a missing field is refused the same way, before
    any policy answers it, so a client that omits one does not pass its tests against
    the mock."""
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock" + path, json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == message
    assert not server.calls
