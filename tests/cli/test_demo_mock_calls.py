"""The demo's mock server keeps none of the calls it answers: each kept call holds its
whole request, history and all, and the demo never reads them (a demo of 2 agents and
400 turns grew to 866 MB holding the last 1,000)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import retinue.providers.mock
from retinue.cli._demo_models import open_model
from retinue.providers import ModelRequest
from retinue.providers.mock import MockServer
from tests.providers.support import collect, make_request

from ._demo_kit import demo_args


async def test_the_demo_mock_server_keeps_no_calls(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    """R13.1: the demo's requests are answered, and the server keeps none of them."""
    servers: list[MockServer] = []
    opened = retinue.providers.mock.open_mock_server

    @asynccontextmanager
    async def recorded(*args: Any, **kwargs: Any) -> AsyncIterator[MockServer]:
        async with opened(*args, **kwargs) as server:
            servers.append(server)
            yield server

    monkeypatch.setattr(retinue.providers.mock, "open_mock_server", recorded)
    with trio.fail_after(60):
        async with open_model(demo_args(latency=0.0)) as (model, name):
            for _ in range(3):
                request: ModelRequest = make_request("hi", model=name)
                collected = await collect(model, request)
                assert collected.message.content
    [server] = servers
    assert server.statistics().requests == 3
    assert server.calls == ()
