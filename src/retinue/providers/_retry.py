"""The retry policy: which failures are retried, and how long to wait before each retry."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import final

import attrs

from retinue._checks import collection_error, finite_number_error, positive_int_error
from retinue._errors import ModelError

from ._failures import RETRYABLE_STATUSES, ProviderError, retry_verdict

__all__ = ["RetryNotice", "RetryPolicy"]


def _attempts(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    error = positive_int_error(value)
    if error is not None:
        expected = "an int" if error is TypeError else "at least 1"
        raise error(f"RetryPolicy.{attribute.name} must be {expected}, not {value!r}")


def _finite_seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    # NaN passes every comparison and an infinite cap makes jitter meaningless:
    # both would hide a broken setting until the first retry. So would a bool.
    error = finite_number_error(value, zero=True)
    if error is not None:
        raise error(
            f"RetryPolicy.{attribute.name} must be a finite number of seconds >= 0, not {value!r}"
        )


def _switch(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    # A string is always true: "no" would be taken as yes.
    if not isinstance(value, bool):
        raise TypeError(f"RetryPolicy.{attribute.name} must be a bool, not {value!r}")


def _statuses(values: Iterable[int]) -> frozenset[int]:
    # A typed converter: with a bare ``frozenset`` type checkers cannot type the argument.
    # A status no response has ("503", a string of them) would never be retried, unsaid.
    if collection_error(values) is not None:
        raise TypeError(
            f"RetryPolicy.retryable_statuses must be a collection of HTTP statuses, not {values!r}"
        )
    statuses = tuple(values)
    for status in statuses:
        if type(status) is not int:
            raise TypeError(
                f"RetryPolicy.retryable_statuses must hold int HTTP statuses, not {status!r}"
            )
        if not 100 <= status <= 599:
            raise ValueError(
                "RetryPolicy.retryable_statuses must hold HTTP statuses from 100 to 599, "
                f"not {status!r}"
            )
    return frozenset(statuses)


@final
@attrs.frozen
class RetryPolicy:
    """Exponential backoff with full jitter, bounded attempts, ``Retry-After`` honoured.

    The SDKs' own retries are turned off by the adapters, so this is the only
    retry policy. A call is retried only before its first chunk was yielded.
    A provider asking for a longer wait than ``max_retry_after`` ends the
    retries at once, as the official ``openai`` SDK does past its two minutes.
    """

    max_attempts: int = attrs.field(default=4, validator=_attempts)
    """Attempts in total, the first included."""
    base_delay: float = attrs.field(default=0.5, validator=_finite_seconds)
    """The backoff cap of the first retry; it doubles with each further retry."""
    max_delay: float = attrs.field(default=30.0, validator=_finite_seconds)
    """The largest backoff cap."""
    max_retry_after: float = attrs.field(default=120.0, validator=_finite_seconds)
    """The longest wait a provider may ask for and still be retried after it.

    A failure whose ``retry_after`` (its ``Retry-After``, or the reset of a budget
    the rate-limit headers report spent) is longer is not retried: a retry before
    then would only be refused again.
    """
    retryable_statuses: frozenset[int] = attrs.field(
        default=RETRYABLE_STATUSES, converter=_statuses
    )
    """HTTP statuses that are retried."""
    retry_connection_errors: bool = attrs.field(default=True, validator=_switch)
    """Whether connection failures (and streams cut before their first chunk) are retried."""

    def is_retryable(self, error: BaseException) -> bool:
        """Whether *error* may succeed on a retry under this policy; never blocks.

        An HTTP status error is retried as the provider's ``x-should-retry``
        says when it says ``true`` or ``false`` (another value says neither);
        else when its status is in ``retryable_statuses``, unless it says the
        quota is spent (a 429 that only a billing change mends). Any other
        provider error (a connection failure, a stream cut before its first
        chunk) is retried when it is retryable and ``retry_connection_errors``
        is set.
        An error asking for a wait longer than ``max_retry_after`` is never retried,
        ``x-should-retry`` notwithstanding: it fails with its ``retry_after`` set,
        for the caller to send the request again then.
        """
        if not isinstance(error, ProviderError) or self._waits_too_long(error):
            return False
        if error.status is not None:
            # Not error.retryable: that judged the status by the default statuses,
            # which retryable_statuses replaces. What the status does not decide
            # is judged as the error was.
            verdict = retry_verdict(error.code, error.headers)
            return error.status in self.retryable_statuses if verdict is None else verdict
        return error.retryable and self.retry_connection_errors

    def _waits_too_long(self, error: ProviderError) -> bool:
        # No bool: True is an int, and no provider asks for a wait of True seconds.
        wait = error.retry_after
        return (
            isinstance(wait, int | float)
            and not isinstance(wait, bool)
            and wait > self.max_retry_after
        )

    def delay(
        self, attempt: int, error: BaseException | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait after failed attempt number *attempt* (1-based).

        A positive ``Retry-After`` from *error* wins (capped by ``max_retry_after``,
        though :meth:`is_retryable` refuses an error asking for more);
        otherwise full jitter: uniform in ``[0, min(max_delay, base_delay * 2**(attempt-1))]``.
        A ``Retry-After`` of 0 (or a date already past) gets the backoff, as in
        the official SDKs: obeyed, it would retry with no wait at all.
        """
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > 0:
            return min(float(retry_after), self.max_retry_after)
        # The exponent is bounded first: 2.0 ** 1024 overflows a float.
        cap = min(self.max_delay, self.base_delay * 2.0 ** min(attempt - 1, 64))
        return (rng or random).uniform(0.0, cap)


@final
@attrs.frozen
class RetryNotice:
    """One retry about to happen: what failed and how long the wait is."""

    session_id: str | None
    """The session whose request is retried."""
    provider: str | None
    """The provider the request went to."""
    model: str
    """The model name of the request."""
    attempt: int
    """The attempt that failed (1-based); the retry is attempt ``attempt + 1``."""
    delay: float
    """Seconds the retry policy waits before the retry; under admission, the retry then
    waits for admission too, which the lane's pause after a 429 may make longer."""
    code: str | None
    """The error code of the failure."""
    status: int | None
    """The HTTP status of the failure, if any."""
    message: str
    """The failure's message."""

    @classmethod
    def of(
        cls,
        error: ModelError,
        *,
        session_id: str | None,
        provider: str | None,
        model: str,
        attempt: int,
        delay: float,
    ) -> RetryNotice:
        """Describe *error* as a notice."""
        return cls(
            session_id, provider, model, attempt, delay, error.code, error.status, error.message
        )
