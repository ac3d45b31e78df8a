"""Recorded exchanges the mock server cannot replay as recorded are refused, naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retinue.providers.mock import RawReply, ReplayPolicy, load_exchange

from .support import ALL_FIXTURES

GOOD: dict[str, Any] = {
    "status": 200,
    "headers": {"content-type": "application/json"},
    "body": "{}",
}


def _exchange(**response: object) -> dict[str, object]:
    return {"provider": "openai", "response": {**GOOD, **response}}


@pytest.mark.parametrize(
    ("exchange", "field"),
    [
        (_exchange(body={"id": "resp_1"}), "response.body"),
        (_exchange(body=None), "response.body"),
        (_exchange(status="200"), "response.status"),
        (_exchange(status=True), "response.status"),
        (_exchange(status=200.5), "response.status"),
        (_exchange(status=99), "response.status"),
        (_exchange(headers=[["content-type", "text/plain"]]), "response.headers"),
        (_exchange(headers={"retry-after": 5}), "response.headers['retry-after']"),
        ({"provider": "openai", "response": [200]}, "response"),
        ({"provider": "openai"}, "response"),
    ],
    ids=[
        "parsed-body",
        "no-body",
        "status-text",
        "status-bool",
        "status-float",
        "status-out-of-range",
        "headers-list",
        "header-number",
        "response-list",
        "no-response",
    ],
)
def test_a_replay_of_an_exchange_it_cannot_serve_as_recorded_is_refused(
    exchange: dict[str, object], field: str
) -> None:
    """A body stored parsed (which would be served as Python's repr), a status that is no HTTP
    status, or headers that are no strings are a ``ValueError`` naming the field, not an
    ``AssertionError``, a ``KeyError`` or a reply with other bytes than recorded."""
    with pytest.raises(ValueError, match="recorded exchange") as caught:
        ReplayPolicy.of(exchange)
    assert f"{field} must be" in str(caught.value)
    with pytest.raises(ValueError, match="recorded exchange"):
        RawReply.from_fixture(exchange)


def test_a_file_that_is_no_recorded_exchange_is_refused_naming_it(tmp_path: Path) -> None:
    """A file holding broken JSON, or an exchange with a parsed body, is refused with a
    ``ValueError`` naming the file (and the field)."""
    broken = tmp_path / "broken.json"
    broken.write_text('{"response": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.json"):
        ReplayPolicy.of(broken)
    parsed = tmp_path / "parsed.json"
    parsed.write_text(json.dumps(_exchange(body={"id": "resp_1"})), encoding="utf-8")
    with pytest.raises(ValueError, match=r"parsed\.json.*response\.body must be"):
        load_exchange(parsed)


def test_every_shared_recording_is_replayed_with_its_recorded_bytes() -> None:
    """Each recorded exchange loads and replays its status, headers and body as recorded."""
    for path in ALL_FIXTURES:
        recorded = json.loads(path.read_text(encoding="utf-8"))["response"]
        [reply] = ReplayPolicy.of(path).replies
        assert reply.status == recorded["status"]
        assert dict(reply.headers) == recorded["headers"]
        assert reply.body == recorded["body"].encode("utf-8")
