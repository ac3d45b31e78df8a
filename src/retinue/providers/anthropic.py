"""``AnthropicModel``: the Anthropic Messages adapter over the official SDK.

This is the only module that imports ``anthropic``. The SDK builds and sends
the request (auth, version header, base URL, error bodies); the response stream
is read raw and its SSE parsed here.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import final

import anthropic
import httpx2
from anthropic._base_client import get_platform

from retinue._checks import positive_int_error
from retinue._request import ModelRequest
from retinue._stream import StreamChunk

from ._anthropic_request import (
    DEFAULT_MAX_TOKENS,
    MIN_THINKING_BUDGET,
    anthropic_request_body,
    no_room_beside_thinking,
)
from ._anthropic_wire import AnthropicStreamDecoder
from ._bodies import sdk_status_error
from ._client import ClientOwner, post_json, prime_platform
from ._extra_body import ANTHROPIC_BUILT, frozen_extra_body
from ._failures import ProviderError, unsent
from ._feedback import report_response
from ._http import (
    connection_failed,
    decode_response,
    shown_url,
)
from ._http_client import check_http_settings, make_http_client
from ._pools import SHARD_HEADER, shard_key
from ._sending import close_response
from ._settings import check_header_lines, check_header_names, check_identity
from ._urls import base_url_from, client_base_url, is_own_api, needs_key

__all__ = ["AnthropicModel"]

ANTHROPIC_URL = "https://api.anthropic.com"
"""The base URL of Anthropic's own API."""


def _check_count(value: object, name: str) -> None:
    # Sent as it is, a bad count fails every request the adapter makes.
    error = positive_int_error(value)
    if error is not None:
        expected = "an int" if error is TypeError else "at least 1"
        raise error(f"{name} must be {expected}, not {value!r}")


def _check_no_forced_tool(extra_body: Mapping[str, object] | None) -> None:
    """Refuse a ``tool_choice`` that forces a tool beside thinking, as the API refuses it
    ("Thinking may not be enabled when tool_choice forces tool use")."""
    choice = (extra_body or {}).get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        raise ValueError(
            f"extra_body.tool_choice: a tool_choice of type {choice.get('type')!r} forces "
            "tool use, which the API refuses beside thinking (thinking_budget): use "
            "'auto' or 'none', or an adapter without thinking_budget"
        )


def _check_thinking_budget(thinking_budget: int, default_max_tokens: int) -> None:
    if type(thinking_budget) is not int:
        raise TypeError(f"thinking_budget must be an int, not {thinking_budget!r}")
    if thinking_budget < MIN_THINKING_BUDGET:
        raise ValueError(
            f"thinking_budget must be at least {MIN_THINKING_BUDGET} tokens (the API's "
            f"minimum), not {thinking_budget}"
        )
    if default_max_tokens <= thinking_budget:
        # Every request without its own max_tokens would fail: refused once, here.
        raise ValueError(
            no_room_beside_thinking(default_max_tokens, thinking_budget, "default_max_tokens")
        )


def _key_for(
    api_key: str | None, base_url: str | None, default_headers: Mapping[str, str] | None
) -> tuple[str | None, bool]:
    """The key to build the client with, checked, and whether requests need a real one
    the adapter lacks (to another provider's own API, refused before sending)."""
    key_source = "api_key" if api_key else "ANTHROPIC_API_KEY"
    api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    # The SDK reads the token only when it has no key: beside one, a stale
    # token is never sent and must not stop a working setup from starting.
    auth_token = os.environ.get("ANTHROPIC_AUTH_TOKEN") if api_key is None else None
    check_header_lines(default_headers, **{key_source: api_key}, ANTHROPIC_AUTH_TOKEN=auth_token)
    if api_key is not None or auth_token or is_own_api(base_url, "anthropic.com"):
        return api_key, False
    # Only Anthropic's own API gets the SDK's credential chain: elsewhere a profile's
    # Anthropic token (and its refresh token) would go to that host. Another provider's
    # own API refuses the placeholder: refused here, nothing sent.
    return "not-needed", needs_key(base_url)


def _missing_credentials(provider: str, host: str | None = None) -> ProviderError:
    """The refusal of a request sent without credentials; *host*: another provider's API,
    which an Anthropic profile does not serve."""
    if host is None:
        message = (
            f"{provider}: missing credentials: pass api_key= or set the ANTHROPIC_API_KEY "
            "environment variable (or ANTHROPIC_AUTH_TOKEN, or choose a profile with "
            "ANTHROPIC_PROFILE)"
        )
    else:
        message = (
            f"{provider}: missing credentials for {host}: pass api_key= or set the "
            "ANTHROPIC_API_KEY environment variable (or ANTHROPIC_AUTH_TOKEN); an "
            "Anthropic profile serves Anthropic's own API alone"
        )
    return unsent(ProviderError(message, code="MISSING_CREDENTIALS"))


@final
class AnthropicModel(ClientOwner):
    """A :class:`~retinue.providers.Model` over Anthropic's Messages API.

    Use it as an async context manager (or call :meth:`aclose`): it owns one
    SDK client and its connection pools. Keys default to ``ANTHROPIC_API_KEY``;
    ``base_url`` has no ``/v1`` suffix. The SDK's retries are off; wrap the
    model with :func:`~retinue.providers.manage` for retries and admission.

    Args:
        base_url: The API root, an ``http(s)://`` URL (default: ``ANTHROPIC_BASE_URL``
            when set and not empty, else Anthropic's).
        api_key: The key. Without one (nor ``ANTHROPIC_AUTH_TOKEN``), the SDK's credential
            chain (a profile) serves Anthropic's own API alone; a compatible server gets
            a placeholder, and OpenAI's or DeepSeek's API nothing: ``MISSING_CREDENTIALS``.
        provider: The provider name this adapter reports.
        default_max_tokens: ``max_tokens`` when a request sets none (the API requires one).
        thinking_budget: Enables extended thinking with this token budget: at least
            1024, and below ``default_max_tokens`` (thinking tokens count toward
            ``max_tokens``). The agent's temperature is then not sent, and a
            request whose ``max_tokens`` is not above the budget fails with
            ``INVALID_REQUEST`` before anything is sent. A turn (its tool loop)
            keeps the thinking setting it began with: a request whose history ends
            on tool results within a turn whose first assistant message does not
            start with thinking (the turn began on another API, or without
            thinking) is sent without thinking, as if no budget were given; the
            next turn thinks.
        extra_body: Request fields the adapter has no setting for (``top_k``,
            ``metadata``, ``tool_choice``, ``service_tier``...), as the SDK's per-call
            ``extra_body``: JSON values merged into the top level of every request
            body, checked and copied when the adapter is built. The fields the
            adapter builds are refused: ``model``, ``messages``, ``system``,
            ``tools``, ``stream``, ``max_tokens``, ``temperature``,
            ``stop_sequences``, and ``thinking`` beside *thinking_budget*, as is a
            ``tool_choice`` forcing a tool (``any``, ``tool``) beside it, which the
            API refuses; a ``tool_choice`` goes only to a request with tools. A
            ``thinking`` given here is sent as given, except within a turn begun
            without thinking (see *thinking_budget*).
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

    Raises:
        TypeError: *default_max_tokens* or *thinking_budget* is no int, *provider* no
            non-empty str, *default_headers* no mapping of str to str, *base_url*
            or *api_key* neither None nor a str, or *transport* no transport.
        ValueError: *base_url*, or ``ANTHROPIC_BASE_URL`` in its place, is no
            ``http(s)://`` URL with a host (named, with the value); a default
            header's name holds a character beyond ASCII or is no HTTP token;
            the key (or ``ANTHROPIC_API_KEY``, or ``ANTHROPIC_AUTH_TOKEN`` when
            there is no key) or a default header's value holds a control
            character (a line break, say) or whitespace at either end (named,
            without the value);
            *default_max_tokens* is below 1, *thinking_budget* below 1024 or not
            below *default_max_tokens*; *extra_body* sets a field the adapter
            builds (named), or forces a tool beside *thinking_budget*;
            a connection count below 1, a timeout that is not a positive finite number,
            or a *proxy* that is not a proxy URL or comes with a *transport*.
    """

    _client: anthropic.AsyncAnthropic

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str = "anthropic",
        default_headers: Mapping[str, str] | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking_budget: int | None = None,
        extra_body: Mapping[str, object] | None = None,
        max_connections: int = 1000,
        pool_size: int = 100,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        proxy: str | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        check_identity(
            provider=provider, headers=default_headers, omit=anthropic.Omit, api_key=api_key
        )
        check_header_names(default_headers)
        check_http_settings(
            max_connections=max_connections,
            pool_size=pool_size,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
        _check_count(default_max_tokens, "default_max_tokens")
        if thinking_budget is not None:
            _check_thinking_budget(thinking_budget, default_max_tokens)
        built = ANTHROPIC_BUILT if thinking_budget is None else (*ANTHROPIC_BUILT, "thinking")
        self._extra_body = frozen_extra_body(extra_body, built, "AnthropicModel")
        if thinking_budget is not None:
            _check_no_forced_tool(self._extra_body)
        base_url = base_url_from(base_url, variable="ANTHROPIC_BASE_URL")
        api_key, self._needs_real_key = _key_for(api_key, base_url, default_headers)
        self.provider = provider
        self._read_timeout = timeout
        self._default_max_tokens = default_max_tokens
        self._thinking_budget = thinking_budget
        http_client = make_http_client(
            max_connections=max_connections,
            pool_size=pool_size,
            timeout=timeout,
            connect_timeout=connect_timeout,
            transport=transport,
            proxy=proxy,
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=client_base_url(
                base_url, variable="ANTHROPIC_BASE_URL", default=ANTHROPIC_URL
            ),
            default_headers=default_headers,
            max_retries=0,
            timeout=httpx2.Timeout(timeout, connect=connect_timeout, pool=None),
            http_client=http_client,
        )
        prime_platform(self._client, get_platform)

    @property
    def has_credentials(self) -> bool:
        """Whether the SDK client found credentials: an API key, a bearer token or a provider.

        The client settles them when built (given, from the environment, or
        from a profile) but refuses a request without them only when it is
        sent (``MISSING_CREDENTIALS``); this lets a caller refuse to start instead.
        """
        client = self._client
        return not self._needs_real_key and (
            client.api_key is not None
            or client.auth_token is not None
            or client.credentials is not None
        )

    def __repr__(self) -> str:
        return f"AnthropicModel(provider={self.provider!r}, base_url={shown_url(self.base_url)!r})"

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        """Stream one call; closing or cancelling the iterator closes the HTTP response."""
        return self._stream(request)

    async def _send(self, body: dict[str, object], session_id: str | None) -> httpx2.Response:
        headers = {"X-Stainless-Raw-Response": "stream", "Accept": "text/event-stream"}
        if session_id is not None:
            headers[SHARD_HEADER] = shard_key(session_id)
        return await post_json(lambda sent: self._post(sent, headers), body, self.provider)

    async def _post(self, content: bytes, headers: dict[str, str]) -> httpx2.Response:
        try:
            return await self._client.post(
                "/v1/messages",
                cast_to=httpx2.Response,
                content=content,
                options={"headers": headers},
            )
        except anthropic.APIStatusError as exc:
            raise sdk_status_error(exc, self.provider) from exc
        except anthropic.APIConnectionError as exc:
            timed_out = isinstance(exc, anthropic.APITimeoutError)
            error, cause = connection_failed(exc, self.provider, timed_out=timed_out)
            raise error from cause
        except TypeError as exc:
            # The SDK's refusal of a request it has no credentials for.
            if not self.has_credentials:
                raise _missing_credentials(self.provider) from exc
            raise ProviderError(
                f"{self.provider} client error: {exc}", code="CLIENT_ERROR"
            ) from exc
        except anthropic.AnthropicError as exc:
            raise ProviderError(
                f"{self.provider} client error: {exc}", code="CLIENT_ERROR"
            ) from exc

    async def _stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        self._check_open()
        if self._needs_real_key:
            raise _missing_credentials(self.provider, httpx2.URL(self.base_url).host)
        body = anthropic_request_body(
            request,
            default_max_tokens=self._default_max_tokens,
            thinking_budget=self._thinking_budget,
            extra_body=self._extra_body,
        )
        response = await self._send_open(lambda: self._send(body, request.session_id))
        try:
            report_response(response.headers)
            decoder = AnthropicStreamDecoder()
            chunks = decode_response(
                response, decoder, provider=self.provider, read_timeout=self._read_timeout
            )
            async with aclosing(chunks):
                with self._closed_as_such():
                    async for chunk in chunks:
                        yield chunk
        finally:
            await close_response(response)
