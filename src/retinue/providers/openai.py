"""``OpenAIModel``: the OpenAI adapter (Chat Completions or Responses) over the official SDK.

This is the only module that imports ``openai``. The SDK builds and sends the
request (auth, base URL, error bodies); the response stream is read raw and its
SSE parsed here, which costs a fraction of the SDK's per-chunk objects.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Literal, final

import httpx2
import openai
from openai._base_client import get_platform

from retinue._request import ModelRequest
from retinue._stream import StreamChunk

from ._bodies import sdk_status_error
from ._client import ClientOwner, post_json, prime_platform
from ._extra_body import CHAT_BUILT, RESPONSES_BUILT, frozen_extra_body, merge_extra_body
from ._failures import ProviderError, unsent
from ._feedback import report_response
from ._http import (
    StreamDecoder,
    connection_failed,
    decode_response,
    shown_url,
)
from ._http_client import check_http_settings, make_http_client
from ._openai_chat import chat_request_body
from ._openai_chat_stream import ChatStreamDecoder
from ._openai_responses import responses_request_body
from ._openai_responses_stream import ResponsesStreamDecoder
from ._pools import SHARD_HEADER, shard_key
from ._sending import close_response
from ._settings import check_header_names, check_header_values, check_identity
from ._urls import base_url_from, client_base_url, is_own_api, needs_key, on_domain

__all__ = ["OpenAIModel"]

Api = Literal["chat", "responses"]

OPENAI_URL = "https://api.openai.com/v1"
"""The base URL of OpenAI's own API."""


def _is_deepseek(provider: str, base_url: str | None) -> bool:
    """Whether requests go to DeepSeek, by the provider's name or the URL's host."""
    return provider == "deepseek" or (base_url is not None and on_domain(base_url, "deepseek.com"))


def _identity(organization: str | None, project: str | None) -> dict[str, str | None]:
    """The organization and project the SDK sends, by the setting or variable they come from.

    Given ``None``, the SDK reads each from its environment variable.
    """
    return {
        "organization" if organization is not None else "OPENAI_ORG_ID": (
            organization if organization is not None else os.environ.get("OPENAI_ORG_ID")
        ),
        "project" if project is not None else "OPENAI_PROJECT_ID": (
            project if project is not None else os.environ.get("OPENAI_PROJECT_ID")
        ),
    }


@final
class OpenAIModel(ClientOwner):
    """A :class:`~retinue.providers.Model` over the OpenAI API or any compatible server.

    Use it as an async context manager (or call :meth:`aclose`): it owns one
    SDK client and its connection pools. ``base_url`` points it at DeepSeek,
    vLLM, Ollama, llama.cpp or any other OpenAI-compatible server; keys default
    to ``OPENAI_API_KEY``. The SDK's retries are off; wrap the model with
    :func:`~retinue.providers.manage` for retries and admission control.

    Args:
        base_url: The API root including ``/v1``, an ``http(s)://`` URL (default:
            ``OPENAI_BASE_URL`` when set and not empty, else OpenAI's).
        api_key: The key; a local server without auth gets a placeholder.
        api: ``"chat"`` (Chat Completions) or ``"responses"`` (Responses API).
        provider: The provider name this adapter reports (for routing and admission).
        max_tokens_param: ``"max_completion_tokens"`` (OpenAI's default) or
            ``"max_tokens"`` (the default for other servers).
        replay_reasoning: Send unsigned reasoning back as ``reasoning_content`` (Chat
            Completions only). DeepSeek's thinking mode requires it after a tool call;
            ``None`` turns it on for provider ``"deepseek"`` or a ``deepseek.com`` host.
        extra_body: Request fields the adapter has no setting for (``tool_choice``,
            ``parallel_tool_calls``, ``reasoning_effort``, ``seed``, ``top_p``,
            ``metadata``, ``store``, ``response_format``; in the Responses API
            ``reasoning``, ``include``, ``text``...), as the SDK's per-call
            ``extra_body``: JSON values merged into the top level of every request
            body, checked and copied when the adapter is built. The fields the
            adapter builds are refused: ``model``, ``tools``, ``stream``,
            ``temperature``; in Chat Completions ``messages``, ``stream_options``,
            ``max_tokens``, ``max_completion_tokens``, ``stop`` and ``n`` (only the
            first choice is read); in the Responses API ``input``, ``instructions``,
            ``max_output_tokens``, and ``previous_response_id`` and
            ``conversation``, which would add a stored history to the one each
            request sends. ``tool_choice`` and ``parallel_tool_calls`` go only to a
            request with tools (the APIs refuse them otherwise).
        max_connections: Connections in total, split into pools of at most ``pool_size``;
            a request that finds all in use waits for one (``POOL_TIMEOUT`` when
            ``timeout`` ends first). Past 65,536, the ports a host has to reach one
            server by, it is 65,536.
        timeout: Seconds allowed between bytes of a response (and for its headers).
        proxy: A proxy URL (``http://``, ``https://`` or ``socks5://``) for every request.
            Without one, requests go through the proxies ``HTTP_PROXY``, ``HTTPS_PROXY``
            and ``ALL_PROXY`` name, except to hosts ``NO_PROXY`` lists and this machine,
            much as the SDK's own client sends them.
        transport: An ``httpx2`` transport to use instead of the sharded pools and any
            proxy (tests).

    Without a key, to OpenAI's own API (no ``base_url``), Anthropic's or DeepSeek's,
    the adapter builds, :attr:`has_credentials` is false, and each request fails
    with a :class:`~retinue.providers.ProviderError` coded ``MISSING_CREDENTIALS``;
    any other server gets a placeholder key.

    Raises:
        TypeError: *provider* is no non-empty str, *default_headers* no mapping of
            str to str, *extra_body* no mapping of str to lossless JSON (named, with
            its path), *base_url*, *api_key*, *organization* or *project* neither
            None nor a str, or *transport* no transport.
        ValueError: *base_url*, or ``OPENAI_BASE_URL`` in its place, is no
            ``http(s)://`` URL with a host (named, with the value); the key,
            *organization* or *project* (or the variable each defaults to) or a
            default header holds a character beyond ASCII or a control character
            (a line break, say), or whitespace at either end (named, without the
            value); a default header's name is no HTTP token; *api* or
            *max_tokens_param* is unknown; *extra_body* sets a field the adapter
            builds (named); a connection count
            below 1, a timeout that is not a positive finite number, or a *proxy*
            that is not a proxy URL or comes with a *transport*.
    """

    _client: openai.AsyncOpenAI

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api: Api = "chat",
        provider: str = "openai",
        organization: str | None = None,
        project: str | None = None,
        default_headers: Mapping[str, str] | None = None,
        max_tokens_param: str | None = None,
        replay_reasoning: bool | None = None,
        extra_body: Mapping[str, object] | None = None,
        max_connections: int = 1000,
        pool_size: int = 100,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        proxy: str | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        check_identity(
            provider=provider,
            headers=default_headers,
            omit=openai.Omit,
            api_key=api_key,
            organization=organization,
            project=project,
        )
        check_http_settings(
            max_connections=max_connections,
            pool_size=pool_size,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
        if api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")
        if max_tokens_param not in (None, "max_completion_tokens", "max_tokens"):
            raise ValueError(
                "max_tokens_param must be 'max_completion_tokens' or 'max_tokens', "
                f"not {max_tokens_param!r}"
            )
        built, adapter = (
            (RESPONSES_BUILT, "OpenAIModel (Responses)")
            if api == "responses"
            else (CHAT_BUILT, "OpenAIModel (Chat Completions)")
        )
        self._extra_body = frozen_extra_body(extra_body, built, adapter)
        base_url = base_url_from(base_url, variable="OPENAI_BASE_URL")
        key_source = "api_key" if api_key else "OPENAI_API_KEY"
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        check_header_names(default_headers)
        check_header_values(
            default_headers, **{key_source: api_key}, **_identity(organization, project)
        )
        if api_key is None and not needs_key(base_url):
            api_key = "not-needed"
        self.provider = provider
        self._has_key = api_key is not None
        self._read_timeout = timeout
        self.api: Api = api
        self._max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if is_own_api(base_url, "openai.com") else "max_tokens"
        )
        if replay_reasoning is None:
            replay_reasoning = _is_deepseek(provider, base_url)
        self._replay_reasoning = replay_reasoning
        # Models this server has sent Chat Completions usage for: a stream of one of them
        # that ends at its finish reason, before usage and ``[DONE]``, was cut.
        self._usage_models: set[str] = set()
        http_client = make_http_client(
            max_connections=max_connections,
            pool_size=pool_size,
            timeout=timeout,
            connect_timeout=connect_timeout,
            transport=transport,
            proxy=proxy,
        )
        self._client = openai.AsyncOpenAI(
            # Without a key the SDK refuses to build; a key source that refuses
            # each request instead lets the adapter build and report it.
            api_key=api_key if api_key is not None else self._missing_key,
            base_url=client_base_url(base_url, variable="OPENAI_BASE_URL", default=OPENAI_URL),
            organization=organization,
            project=project,
            default_headers=default_headers,
            max_retries=0,
            timeout=httpx2.Timeout(timeout, connect=connect_timeout, pool=None),
            http_client=http_client,
        )
        prime_platform(self._client, get_platform)

    @property
    def has_credentials(self) -> bool:
        """Whether the adapter has an API key: given, from ``OPENAI_API_KEY``, or the
        placeholder a ``base_url`` without one gets.

        Without one the adapter still builds, and each request fails with
        ``MISSING_CREDENTIALS`` before anything is sent; this lets a caller
        refuse to start instead.
        """
        return self._has_key

    async def _missing_key(self) -> str:
        missing = ProviderError(
            f"{self.provider}: missing credentials: pass api_key= or set the "
            "OPENAI_API_KEY environment variable",
            code="MISSING_CREDENTIALS",
        )
        raise unsent(missing)

    def __repr__(self) -> str:
        return f"OpenAIModel(provider={self.provider!r}, api={self.api!r}, base_url={shown_url(self._client.base_url)!r})"

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        """Stream one call; closing or cancelling the iterator closes the HTTP response."""
        return self._stream(request)

    def _prepare(self, request: ModelRequest) -> tuple[str, dict[str, object], StreamDecoder]:
        if self.api == "responses":
            body = responses_request_body(request)
            merge_extra_body(body, self._extra_body)
            return "/responses", body, ResponsesStreamDecoder()
        body = chat_request_body(
            request,
            max_tokens_param=self._max_tokens_param,
            replay_reasoning=self._replay_reasoning,
        )
        merge_extra_body(body, self._extra_body)
        options = body.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        decoder = ChatStreamDecoder(expect_usage=asked and request.model in self._usage_models)
        return "/chat/completions", body, decoder

    async def _send(
        self, path: str, body: dict[str, object], session_id: str | None
    ) -> httpx2.Response:
        headers = {"X-Stainless-Raw-Response": "stream", "Accept": "text/event-stream"}
        if session_id is not None:
            headers[SHARD_HEADER] = shard_key(session_id)
        return await post_json(lambda sent: self._post(path, sent, headers), body, self.provider)

    async def _post(self, path: str, content: bytes, headers: dict[str, str]) -> httpx2.Response:
        try:
            return await self._client.post(
                path,
                cast_to=httpx2.Response,
                content=content,
                options={"headers": headers, "security": {"bearer_auth": True}},
            )
        except openai.APIStatusError as exc:
            raise sdk_status_error(exc, self.provider) from exc
        except openai.APIConnectionError as exc:
            timed_out = isinstance(exc, openai.APITimeoutError)
            error, cause = connection_failed(exc, self.provider, timed_out=timed_out)
            raise error from cause
        except openai.OpenAIError as exc:
            raise ProviderError(
                f"{self.provider} client error: {exc}", code="CLIENT_ERROR"
            ) from exc

    async def _stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        self._check_open()
        path, body, decoder = self._prepare(request)
        response = await self._send_open(lambda: self._send(path, body, request.session_id))
        try:
            report_response(response.headers)
            chunks = decode_response(
                response, decoder, provider=self.provider, read_timeout=self._read_timeout
            )
            async with aclosing(chunks):
                with self._closed_as_such():
                    async for chunk in chunks:
                        yield chunk
        finally:
            if isinstance(decoder, ChatStreamDecoder) and decoder.sent_usage:
                self._usage_models.add(request.model)
            await close_response(response)
