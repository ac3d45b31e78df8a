"""``manage``: one retry policy and shared admission control around any model."""

from __future__ import annotations

import enum
import functools
import inspect
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Final, Literal, final

import attrs
import trio

from retinue._checks import finite_number_error
from retinue._errors import NoAdapterError
from retinue._request import ModelRequest
from retinue._stream import Finish, StreamChunk, UsageChunk

from ._admission import AdmissionController, AdmissionTicket
from ._estimate import estimate_tokens
from ._failures import QUOTA_EXHAUSTED, ProviderError, never_sent, throttles
from ._feedback import listening
from ._model import Model, ModelRouter, is_adapter
from ._retry import RetryNotice, RetryPolicy

__all__ = ["ManagedModel", "ManagedStatistics", "estimate_tokens", "manage"]

logger = logging.getLogger("retinue.providers")

_NO_RETRY = RetryPolicy(max_attempts=1)


@final
@attrs.frozen
class ManagedStatistics:
    """A snapshot of a :class:`ManagedModel`'s calls."""

    requests: int
    """Streams started."""
    attempts: int
    """Provider calls made (requests plus retries), each counted once admitted."""
    retries: int
    """Retries made, each counted once admitted, as attempts are: one cancelled in its
    wait (the backoff, or admission) was never made."""
    failures: int
    """Streams that ended with an error after their last attempt."""


@final
class ManagedModel:
    """A model with retries and admission control; see :func:`manage`."""

    def __init__(
        self,
        model: Model,
        *,
        retry: RetryPolicy | None = None,
        admission: AdmissionController | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not is_adapter(model):
            raise TypeError(f"manage needs a model adapter (with stream()), got {model!r}")
        _check_options(retry, admission, on_retry)
        self.model = model
        self.retry = retry or _NO_RETRY
        self.admission = admission
        self._on_retry = on_retry
        self._rng = rng or random.Random()
        self._counts = {"requests": 0, "attempts": 0, "retries": 0, "failures": 0}

    def __repr__(self) -> str:
        return f"ManagedModel({self.model!r}, retry={self.retry!r})"

    @property
    def provider(self) -> str | None:
        """The wrapped model's provider name, if it has one."""
        provider = getattr(self.model, "provider", None)
        return provider if isinstance(provider, str) else None

    def statistics(self) -> ManagedStatistics:
        """A snapshot of the counters; never blocks."""
        c = self._counts
        return ManagedStatistics(c["requests"], c["attempts"], c["retries"], c["failures"])

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        """Stream *request* through admission and retries.

        Each attempt waits for admission first. A retryable failure before the
        first chunk is retried after the policy's delay (``on_retry`` is told
        first); after a chunk was yielded, or on the last attempt, it raises.
        Closed right after its finish chunk, the stream's end (R10.2), the call
        completed: its lane counts it a success, as one that ended by itself.
        """
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncGenerator[StreamChunk, None]:
        self._counts["requests"] += 1
        # Routed once per request: every attempt goes to the adapter its lane was named for.
        model, provider = self._route(request)
        attempt = 0
        while True:
            attempt += 1
            yielded = False
            try:
                # One generator for every attempt, not one more within it: each layer of
                # generators costs every chunk a step of its own.
                async with self._admit(request, provider) as ticket:
                    self._count_attempt(attempt)
                    async with _closing(model.stream(request)) as chunks:
                        chunk = await _first(chunks, ticket)
                        if chunk is _NO_CHUNK:
                            return
                        yielded = True
                        try:
                            yield chunk
                            async for chunk in chunks:
                                if ticket is not None and isinstance(chunk, UsageChunk):
                                    ticket.record_usage(chunk.usage.total_tokens)
                                yield chunk
                        except GeneratorExit:
                            # Closed by its reader right after its finish, the stream's
                            # end (R10.2): a completed call, the lane's success.
                            if type(chunk) is not Finish:
                                raise
                return
            except ProviderError as error:
                if not self._retried(error, attempt, yielded=yielded):
                    self._counts["failures"] += 1
                    raise
                delay = self.retry.delay(attempt, error, self._rng)
                self._notify(error, request, provider, attempt, delay)
            except Exception:
                # No provider's failure, so never retried: a failed stream all the same.
                self._counts["failures"] += 1
                raise
            await trio.sleep(delay)

    def _count_attempt(self, attempt: int) -> None:
        """Count an admitted attempt: one cancelled in admission, or in a retry's sleep,
        called no provider, so it is counted only here."""
        self._counts["attempts"] += 1
        if attempt > 1:
            self._counts["retries"] += 1

    def _retried(self, error: ProviderError, attempt: int, *, yielded: bool) -> bool:
        """Whether *error*, ending *attempt*, is retried: only before a chunk was yielded,
        with attempts left, and when the policy retries it."""
        return not yielded and attempt < self.retry.max_attempts and self.retry.is_retryable(error)

    def _route(self, request: ModelRequest) -> tuple[Model, str | None]:
        """The model that serves *request*, and the provider it is admitted and reported under.

        Under a router that is the route's: an exact ``(provider, model)`` route is a
        server of its own (Azure's beside OpenAI's, one adapter type), whose limits and
        429s are its own. A route of the model name alone, or the default, serves it
        whatever provider it names: its adapter's provider, else the request's.
        """
        model = self.model
        if isinstance(model, ModelRouter):
            try:
                model, routed = model.route(request.provider, request.model)
            except NoAdapterError:
                # The router's own stream raises it, as it would unmanaged.
                return model, request.provider
            if routed is not None:
                return model, routed
        provider = getattr(model, "provider", None)
        return model, provider if isinstance(provider, str) and provider else request.provider

    def _admit(
        self, request: ModelRequest, provider: str | None
    ) -> AbstractAsyncContextManager[AdmissionTicket | None]:
        if self.admission is None:
            return nullcontext()
        return _Admitted(self.admission, request, provider, self.retry.max_retry_after)

    def _notify(
        self,
        error: ProviderError,
        request: ModelRequest,
        provider: str | None,
        attempt: int,
        delay: float,
    ) -> None:
        if self._on_retry is None:
            return
        notice = RetryNotice.of(
            error,
            session_id=request.session_id,
            provider=provider,
            model=request.model,
            attempt=attempt,
            delay=delay,
        )
        try:
            returned = self._on_retry(notice)
        except Exception:
            logger.exception("an on_retry callback failed")
            return
        if inspect.isawaitable(returned):
            # Nothing awaits it (the retry must not wait on a listener): closed, so it
            # is not reported as never awaited far from here, and the mistake logged.
            close = getattr(returned, "close", None)
            if close is not None:
                close()
            logger.error("an on_retry callback returned an awaitable, which is never awaited")


def _check_options(retry: object, admission: object, on_retry: object) -> None:
    """Refuse options of another kind: used first at a request, they would fail that
    request with an AttributeError, a callback that cannot be called would only be
    logged, and an async one would only make a coroutine nothing awaits."""
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"manage's retry must be None or a RetryPolicy, got {retry!r}")
    if admission is not None and not isinstance(admission, AdmissionController):
        raise TypeError(
            f"manage's admission must be None or an AdmissionController, got {admission!r}"
        )
    if on_retry is not None and not callable(on_retry):
        raise TypeError(f"manage's on_retry must be None or callable, got {on_retry!r}")
    if _is_async(on_retry):
        raise TypeError(
            f"manage's on_retry must be a plain callable, called and never awaited, "
            f"not the async {on_retry!r}"
        )


def _is_async(callback: object) -> bool:
    """Whether calling *callback* makes a coroutine: an async function, or an instance (in
    a partial or not) whose ``__call__`` is one. A class's call builds an instance."""
    if inspect.iscoroutinefunction(callback):
        return True
    while isinstance(callback, functools.partial):
        callback = callback.func
    return not isinstance(callback, type) and inspect.iscoroutinefunction(
        getattr(callback, "__call__", None)  # noqa: B004 - an instance's async __call__
    )


class _Ended(enum.Enum):
    """What :func:`_first` gives for a stream that ended without a chunk."""

    NO_CHUNK = enum.auto()


_NO_CHUNK: Final = _Ended.NO_CHUNK


async def _first(
    chunks: AsyncIterator[StreamChunk], ticket: AdmissionTicket | None
) -> StreamChunk | Literal[_Ended.NO_CHUNK]:
    """The first chunk of *chunks*, or ``_NO_CHUNK``; the response's headers, reported while
    it is awaited, and a usage it carries go to *ticket*."""
    # A caller's cancel before the request was written whole gives its charge back, as
    # an unsent request's failure does.
    observe, refund = (None, None) if ticket is None else (ticket.observe_headers, ticket.refund)
    with listening(observe, on_unsent=refund):
        try:
            first = await chunks.__anext__()
        except StopAsyncIteration:
            # A stream may end at once, with no checkpoint of its own: an attempt takes one.
            await trio.lowlevel.checkpoint()
            return _NO_CHUNK
    if ticket is not None and isinstance(first, UsageChunk):
        ticket.record_usage(first.usage.total_tokens)
    return first


@asynccontextmanager
async def _closing(stream: AsyncIterator[StreamChunk]) -> AsyncIterator[AsyncIterator[StreamChunk]]:
    """Close *stream* on exit if it can be closed (async generators can)."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


class _Admitted:
    """Hold admission for one attempt; a 429, 503 or 529 is reported to the lane by the ticket.

    So are a failed response's rate-limit headers, as a successful one's are.
    An attempt that never reached the provider (its connection refused, its
    adapter closed, cancelled before it was written whole) gives its charge back:
    it spent none of the provider's budget.
    The ticket bounds every pause by *max_pause*: the lane pauses for no wait
    longer than the retry policy waits for, which fails its request at once.
    """

    def __init__(
        self,
        admission: AdmissionController,
        request: ModelRequest,
        provider: str | None,
        max_pause: float,
    ) -> None:
        self._admission = admission
        self._request = request
        self._provider = provider
        self._max_pause = max_pause
        self._inner: AbstractAsyncContextManager[AdmissionTicket] | None = None
        self._ticket: AdmissionTicket | None = None

    async def __aenter__(self) -> AdmissionTicket:
        self._inner = self._admission.admit(
            provider=self._provider,
            model=self._request.model,
            session_id=self._request.session_id,
            tokens=estimate_tokens(self._request),
            max_pause=self._max_pause,
        )
        self._ticket = await self._inner.__aenter__()
        return self._ticket

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> bool:
        assert self._inner is not None
        assert self._ticket is not None
        try:
            # A 429 may say only through these headers how long the budget stays
            # spent. A spent quota is no budget to wait for: no pause mends it.
            if isinstance(error, ProviderError) and error.code != QUOTA_EXHAUSTED:
                self._ticket.observe_headers(error.headers)
            if throttles(error):
                self._ticket.rate_limited(_lane_pause(error))
            if never_sent(error):
                self._ticket.refund()
        finally:
            # Whatever the report made of the error, the attempt leaves the lane.
            exited = await self._inner.__aexit__(type(error) if error else None, error, None)
        return bool(exited)


def _lane_pause(error: ProviderError) -> float | None:
    """The wait *error* asks of its lane, or ``None`` (the default pause).

    ``None`` for a wait no lane can take: a custom model's NaN or negative wait
    must not replace its error, and an infinite one (a ``Retry-After`` too large
    for a float) gets the default pause, as any wait past ``max_retry_after`` does.
    """
    wait = error.retry_after
    return wait if finite_number_error(wait, zero=True) is None else None


def manage(
    model: Model,
    *,
    retry: RetryPolicy | None = None,
    admission: AdmissionController | None = None,
    on_retry: Callable[[RetryNotice], None] | None = None,
) -> ManagedModel:
    """Wrap *model* with retries and admission control; returns a :class:`Model`.

    Admission is taken per attempt and held until the attempt's stream ends, or is
    closed right after its finish chunk (a completed call all the same);
    retries happen only before the first chunk was yielded; *on_retry* is called
    (synchronously, failures logged) before each retry's wait.

    Raises:
        TypeError: *model* is no model adapter (a class, say), *retry* no
            :class:`RetryPolicy`, *admission* no :class:`AdmissionController`,
            or *on_retry* not callable or async (each may be ``None``).
    """
    return ManagedModel(model, retry=retry, admission=admission, on_retry=on_retry)
