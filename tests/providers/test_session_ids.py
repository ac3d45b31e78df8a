"""What a request's session id does to what the adapters send: it picks a connection pool
and nothing more, whatever characters it holds."""

from __future__ import annotations

import pytest
import trio

from retinue._content import Text
from retinue.providers.mock import MockServer

from .support import collect, make_request, mock_adapter

ALL_APIS = pytest.mark.parametrize("api", ["chat", "responses", "messages"])


@ALL_APIS
@pytest.mark.parametrize(
    "session_id",
    ["café-1", "セッション", "emoji-\N{ROBOT FACE}"],
    ids=["accented", "japanese", "astral"],
)
async def test_a_session_id_beyond_ascii_is_sent(
    api: str, session_id: str, autojump_clock: trio.abc.Clock
) -> None:
    """R11.12: a session id any store accepts (``café-1``) streams its answer: the
    OpenAI adapter does not fail each of that session's requests with ``CLIENT_ERROR``,
    its SDK refusing the id as a header value before anything is sent."""
    server = MockServer()
    with trio.fail_after(60):
        async with mock_adapter(api, server) as model:
            collected = await collect(model, make_request("hi", session_id=session_id))
    assert collected.message.content == (Text("You said: hi alpha bravo"),)
    (call,) = server.calls
    assert all(session_id not in value for value in call.headers.values())
