"""A tool and a reader of tool results, for the contract regression tests."""

from __future__ import annotations

from typing import Any

import trio

import retinue
from retinue.session import ToolResultEvent
from tests.helpers import of_type


@retinue.tool
async def ping() -> str:
    """Answer pong; takes no arguments."""
    await trio.lowlevel.checkpoint()
    return "pong"


def _results(events: Any) -> list[ToolResultEvent]:
    return [e.data for e in of_type(events, "tool/result") if isinstance(e.data, ToolResultEvent)]
