"""A stored header that is JSON but malformed is refused naming the field, as an event line is
(R11.13, R11.14)."""

from __future__ import annotations

import sys

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session
from retinue.stores._common import parse_header
from tests.stores._kit import run_turn
from tests.stores.conftest import StoreKit

LONG = "9" * (sys.get_int_max_str_digits() + 1)
DIGITS = f"an integer of more than {sys.get_int_max_str_digits()} digits"
HEAD = '{"type":"session","id":"h","created_at":'


@pytest.mark.parametrize(
    ("header", "where"),
    [
        (HEAD + '1,"meta":{"a":[1,' + LONG + "]}}", "$.meta.a[1]"),
        (HEAD + LONG + "}", "$.created_at"),
    ],
    ids=["unknown-key", "created-at"],
)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["text", "bytes"])
def test_a_header_holding_a_long_integer_is_malformed_not_unparsable(
    header: str, where: str, as_bytes: bool
) -> None:
    """R11.13, R1.6: the line is JSON; too long a number is a malformed field, named by its path
    as the event loader names one."""
    with pytest.raises(CorruptSessionError) as caught:
        parse_header(header.encode() if as_bytes else header, "h")
    assert caught.value.code == "CORRUPT_HEADER"
    assert str(caught.value) == f"session 'h': session header is malformed: {DIGITS} @ {where}"


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        (HEAD + LONG + ',"id', "the header is not valid UTF-8 JSON"),
        (HEAD + LONG + ',"x":' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ],
    ids=["torn", "too-deep"],
)
def test_a_header_that_is_not_json_after_a_long_integer_is_still_refused_as_such(
    header: str, problem: str
) -> None:
    """R11.13: the parse stops at the long integer; what follows it still decides the refusal."""
    with pytest.raises(CorruptSessionError, match=problem) as caught:
        parse_header(header, "h")
    assert caught.value.code == "CORRUPT_HEADER"


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        (HEAD + '"1"}', "invalid value for type, expected int @ $.created_at"),
        ('{"type":"session","id":"h"}', "required field missing @ $.created_at"),
    ],
    ids=["wrong-type", "missing"],
)
def test_a_header_field_refusal_names_the_field(header: str, problem: str) -> None:
    """R11.13: a wrong or missing header field is named by its path, as an event's is."""
    with pytest.raises(CorruptSessionError) as caught:
        parse_header(header, "h")
    assert caught.value.code == "CORRUPT_HEADER"
    assert str(caught.value) == f"session 'h': session header is malformed: {problem}"


async def test_store_refuses_a_stored_header_with_a_long_integer_naming_it(
    record_kit: StoreKit,
) -> None:
    """R11.14: the session is unloadable with a typed refusal naming where; list keeps serving
    the rest."""
    for session_id in ("long", "fine"):
        session = Session.create(session_id)
        async with record_kit.open() as store:
            store.attach_new(session)
            run_turn(session)
            await store.detach(session)
    record_kit.tamper_header("long", '{"type":"session","id":"long","created_at":' + LONG + "}")
    async with record_kit.open() as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("long")
        assert caught.value.code == "CORRUPT_HEADER"
        # A JSONL store leads with the file and line (R11.13).
        assert str(caught.value).endswith(
            f"session 'long': session header is malformed: {DIGITS} @ $.created_at"
        )
        assert [header.id for header in await store.list()] == ["fine"]
