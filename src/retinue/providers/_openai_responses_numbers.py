"""The count of a Responses stream's events by their ``sequence_number`` (pure)."""

from __future__ import annotations

from ._blocks import malformed

__all__ = ["refuse_misnumbered"]


def refuse_misnumbered(payload: dict[str, object], expected: int) -> None:
    """Refuse an event numbered otherwise than *expected*, the number after the last:
    the stream sent an event twice, lost one or reordered them, and the text read from
    it would be doubled, short or out of order.

    Only a stream numbered as the API numbers it, every event from 0 on, is
    counted: an event whose number is no integer (none, a string, a bool), a
    first event not numbered 0, or a later one numbered 0 returns instead, and
    the caller stops the count: compatible servers and gateways number some
    events only, count from 1, number an item's end 1 again, or number the
    events that end the response apart from those streamed before, from 0, and
    their streams are whole. No event sent twice, lost or reordered is numbered
    0 after the first. An error event returns too: the error it names says more
    than the count.

    Raises:
        ProviderStreamError: ``MALFORMED_RESPONSE``, naming ``sequence_number``, the
            number expected and the one the event carries.
    """
    number = payload.get("sequence_number")
    kind = payload.get("type")
    erred = kind in ("error", "response.failed") or (kind is None and payload.get("error"))
    if expected == 0 or number == 0 or type(number) is not int or erred:
        return
    raise malformed(
        f"responses: an event's sequence_number is {number}, not {expected}: "
        "the stream repeated, lost or reordered events"
    )
