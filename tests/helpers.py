"""Helpers for scenario tests: virtual deadlines, runtimes and log queries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

import retinue
from retinue.session import Event

DEADLINE = 600.0


@asynccontextmanager
async def runtime(model: Any, **options: Any) -> AsyncIterator[retinue.Runtime]:
    """Open a runtime under a virtual deadline so a deadlock fails in zero real time."""
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, **options) as rt:
            yield rt


def types(events: Sequence[Event]) -> list[str]:
    """The type tags of *events*."""
    return [event.type for event in events]


def types_without_chunks(events: Sequence[Event]) -> list[str]:
    """The type tags of *events*, streamed chunks left out."""
    return [event.type for event in events if event.type != "assistant/chunk"]


def of_type(events: Sequence[Event], kind: str) -> list[Event]:
    """Events of one type."""
    return [event for event in events if event.type == kind]


def turn_ends(events: Sequence[Event]) -> list[str]:
    """The end-reason kinds of every turn, in order."""
    return [event.data.reason.kind for event in events if event.type == "turn/end"]  # type: ignore[union-attr]
