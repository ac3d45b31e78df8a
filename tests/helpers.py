"""Helpers for scenario tests: virtual deadlines, runtimes, shared fixtures and log queries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import attrs
import trio

import retinue
from retinue import AgentOptions, Text
from retinue.session import Event, EventLog, Session, TurnEnd, TurnEndReason
from retinue.stores._writebehind import BufferedStore
from retinue.testing import DelegatingStore

DEADLINE = 600.0

OPTIONS = AgentOptions(model="scripted")
"""Options for a test agent: model name ``"scripted"`` (the key of a per-model script)."""

Next = Callable[[], Awaitable[Any]]
"""The ``next`` argument of an interception listener: runs the rest of the chain."""


@asynccontextmanager
async def runtime(model: Any, **options: Any) -> AsyncIterator[retinue.Runtime]:
    """Open a runtime under a virtual deadline so a deadlock fails in zero real time.

    A body that the runtime's own nursery cancelled would end early without an
    error (the nursery takes its own Cancelled): that fails the test here.
    """
    ended: list[bool] = []
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model, **options) as rt:
            yield rt
            ended.append(True)
    assert ended, "the runtime's nursery was cancelled: the test's body did not run to its end"


@contextmanager
def raises_ctrl_c() -> Iterator[None]:
    """Expect the block to raise Ctrl-C as the KeyboardInterrupt it is, not in a group.

    A group holding it fails the test as an assertion: raised on, it would end the run.
    """
    try:
        yield
    except KeyboardInterrupt:
        return
    except BaseExceptionGroup as group:
        raise AssertionError(f"Ctrl-C came out in a group: {group!r}") from group
    raise AssertionError("the block raised no KeyboardInterrupt")


async def idle_events(agent: retinue.Agent) -> EventLog:
    """Wait until *agent* is idle, then return its live event log."""
    await agent.wait_idle()
    return agent.session.events


def record_statuses(rt: retinue.Runtime, agent: retinue.Agent) -> list[str]:
    """Listen to *agent*'s ``agent/status`` and return the list each new status is appended to."""
    statuses: list[str] = []
    rt.hooks.on("agent/status", lambda _agent, status: statuses.append(status), agent=agent)
    return statuses


def cancel_in_first_turn_on(
    rt: retinue.Runtime, agent: retinue.Agent, event_type: str, reason: str
) -> None:
    """Cancel *agent* with *reason* from a ``session/event`` listener hearing its first
    turn's events of *event_type* (each of them: a cancel of a cancelled turn does nothing)."""

    def on_event(_session: object, event: Event) -> None:
        if event.type == event_type and getattr(event.data, "turn", None) == 1:
            agent.cancel(reason)

    rt.hooks.on("session/event", on_event, agent=agent)


# -- tools ---------------------------------------------------------------------------------


@retinue.tool(parallel_safe=True)
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    await trio.sleep(1)
    return f"echo: {text}"


@retinue.tool(parallel_safe=True)
async def nap(seconds: float) -> str:
    """Sleep a little.

    Args:
        seconds: How long.
    """
    await trio.sleep(seconds)
    return "rested"


def city_lookup(calls: list[str], seconds: float = 0.0) -> retinue.tools.Tool:
    """A parallel-safe ``lookup(city)`` tool that records each city in *calls*, takes
    *seconds*, and answers ``sunny``."""

    @retinue.tool(parallel_safe=True)
    async def lookup(city: str) -> str:
        """Weather for a city.

        Args:
            city: The city name.
        """
        calls.append(city)
        await trio.sleep(seconds)
        return "sunny"

    return lookup


# -- log queries ---------------------------------------------------------------------------


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


def last_end_reason(events: Sequence[Event]) -> TurnEndReason:
    """The reason of the last ``turn/end``."""
    data = of_type(events, "turn/end")[-1].data
    assert isinstance(data, TurnEnd)
    return data.reason


def texts(content: Sequence[object]) -> str:
    """The concatenated text blocks of *content*."""
    return "".join(block.text for block in content if isinstance(block, Text))


def user_texts(events: Sequence[Event]) -> list[str]:
    """The text of every ``user/message``."""
    return [texts(e.data.content) for e in of_type(events, "user/message")]  # type: ignore[union-attr]


ANTHROPIC_CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
)
"""Every variable the Anthropic SDK reads credentials from: cleared to test their absence."""


def unchecked(cls: Any, *args: Any) -> Any:
    """*cls* built without its validators: a malformed value that only a bug could make."""
    with attrs.validators.disabled():
        return cls(*args)


async def raise_stray_cancelled() -> None:
    """Raise a ``Cancelled`` caught inside a scope of its own: nothing around it is cancelled."""
    caught: trio.Cancelled | None = None
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            caught = exc
    assert caught is not None
    raise caught


async def kept_stray_cancelled() -> trio.Cancelled:
    """A stray ``Cancelled`` caught earlier, for synchronous code to raise again."""
    try:
        await raise_stray_cancelled()
    except trio.Cancelled as exc:
        return exc
    raise AssertionError("not reached")


def boom(*_args: object) -> None:
    raise RuntimeError("listener failed")


class HeldFlush(DelegatingStore):
    """A store whose flush waits for the test (``release``) before committing."""

    def __init__(self, store: BufferedStore) -> None:
        super().__init__(store)
        self.entered = trio.Event()
        self.release = trio.Event()

    async def flush(self, session: Session) -> None:
        self.entered.set()
        await self.release.wait()
        await self.store.flush(session)
