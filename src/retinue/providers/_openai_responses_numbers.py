"""The count of a Responses stream's events by their ``sequence_number`` (pure)."""

from __future__ import annotations

from ._blocks import malformed

__all__ = ["UNCOUNTED", "count_after_misstep"]

UNCOUNTED = -1
"""The count's state once the stream is known not to be numbered 0, 1, 2, ... on every event."""


def count_after_misstep(payload: dict[str, object], kind: object, expected: int) -> int:
    """The count after an event of type *kind* numbered otherwise than *expected*, the
    number after the last: :data:`UNCOUNTED`, or refused, the stream having sent an
    event twice, lost one or reordered them, so that the text read from it would be
    doubled, short or out of order.

    Only a stream numbered as the API numbers it, every event from 0 on, is
    counted: an event whose number is no integer (none, a string, a bool), a
    first event not numbered 0, or a later one numbered 0 stops the count:
    compatible servers and gateways number some events only, count from 1, or
    number the events that end the response apart from those streamed before,
    from 0, and their streams are whole. A later ``response.created`` numbered 0
    is the stream sent again from its start, and refused. An error event stops
    the count too: the error it names says more than the count.

    Raises:
        ProviderStreamError: ``MALFORMED_RESPONSE``, naming ``sequence_number``, the
            number expected and the one the event carries.
    """
    number = payload.get("sequence_number")
    erred = kind in ("error", "response.failed") or (kind is None and payload.get("error"))
    if expected == 0 or type(number) is not int or erred:
        return UNCOUNTED
    if number != 0:
        problem = "repeated, lost or reordered events"
    elif kind == "response.created":
        problem = "started again"
    else:
        return UNCOUNTED
    raise malformed(
        f"responses: an event's sequence_number is {number}, not {expected}: the stream {problem}"
    )
