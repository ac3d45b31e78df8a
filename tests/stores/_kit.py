"""Builders of realistic session logs for the store tests, and a backend that fails on demand."""

from __future__ import annotations

import contextlib
import errno
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
import trio
import trio.testing

from retinue._content import Text, ToolCall
from retinue._errors import RetinueError, StoreError
from retinue._request import LlmCallConfig
from retinue._stream import (
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Finish,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    EpochHeader,
    Event,
    RequestHeader,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.session._codec import encode_event
from retinue.stores._backend import AppendBatch
from retinue.stores._memory import MemoryBackend
from retinue.stores._writebehind import BufferedStore

__all__ = ["lines", "open_tool_turn", "refusal", "run_turn", "tool_step"]


def _chunks(session: Session, turn: int, step: int, chunks: list[object]) -> list[int]:
    return [session.append(AssistantChunk(turn, step, chunk)).seq for chunk in chunks]  # type: ignore[arg-type]


def tool_step(session: Session, turn: int, step: int, call_id: str) -> None:
    """Append one step whose model output is a tool call, and the call's audit record."""
    call = ToolCall(call_id, "lookup", '{"city":"Paris"}')
    session.append(StepStart(turn, step))
    seqs = _chunks(
        session,
        turn,
        step,
        [
            BlockStart(0, "tool-call"),
            ToolCallDelta(0, call_id, '{"city":', "lookup"),
            ToolCallDelta(0, None, '"Paris"}'),
            BlockEnd(0, call),
            UsageChunk(Usage(10, 5)),
            Finish(TOOL_CALLS),
        ],
    )
    session.append(
        AssistantMessage(turn, step, (call,), Usage(10, 5)),
        surface="append",
        source_event_seqs=seqs,
    )
    session.append(ToolCallEvent(turn, step, call_id, "lookup", call.arguments))


def run_turn(session: Session, text: str = "hello") -> None:
    """Append one complete turn of about 22 events: a tool step, then a text step."""
    turn = session.next_turn_number()
    session.append(TurnStart(turn, TurnTrigger("message")))
    session.append(UserMessage((Text(text),)), surface="append")
    if session.current_header is None:
        session.append(RequestHeader(EpochHeader(LlmCallConfig("m"), system="be brief"), "initial"))
    call_id = f"call-{turn}"
    tool_step(session, turn, 1, call_id)
    call_seq = len(session.events) - 1
    session.append(
        ToolResultEvent(turn, 1, call_id, (Text("sunny, 21°C — “ok”"),)),
        surface="append",
        source_event_seqs=[call_seq],
    )
    session.append(StepEnd(turn, 1))
    session.append(StepStart(turn, 2))
    reply = "It is sunny in Paris."
    seqs = _chunks(
        session,
        turn,
        2,
        [
            BlockStart(0, "text"),
            TextDelta(0, "It is "),
            TextDelta(0, "sunny in Paris."),
            BlockEnd(0, Text(reply)),
            Finish(STOP),
        ],
    )
    session.append(
        AssistantMessage(turn, 2, (Text(reply),), Usage(20, 7)),
        surface="append",
        source_event_seqs=seqs,
    )
    session.append(StepEnd(turn, 2))
    session.append(TurnEnd(turn, TurnEndReason.completed()))


def open_tool_turn(session: Session) -> str:
    """Append a turn that stops after a tool call was logged (a crash mid-step); return its call id."""
    turn = session.next_turn_number()
    session.append(TurnStart(turn, TurnTrigger("message")))
    session.append(UserMessage((Text("and tomorrow?"),)), surface="append")
    call_id = f"call-{turn}"
    tool_step(session, turn, 1, call_id)
    return call_id


def lines(events: Sequence[Event]) -> list[str]:
    """The canonical JSON lines of *events* (what byte-identical means)."""
    return [encode_event(event) for event in events]


class OutageBackend:
    """A memory backend whose writes fail with an I/O error while ``down`` is set."""

    blocking = False

    def __init__(self) -> None:
        self.inner = MemoryBackend()
        self.down = False

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        if self.down:
            raise OSError(28, "No space left on device")
        return self.inner.write(batches)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


REAL_DEADLINE = 60.0
"""Real seconds: a held call waits in a worker thread, which would race a virtual clock ahead."""


class HeldCall:
    """Holds the calls of a backend method until :attr:`proceed` is set, saying when one began."""

    def __init__(self, call: Callable[..., object]) -> None:
        self._call = call
        self.reached = threading.Event()
        self.proceed = threading.Event()

    def __call__(self, *args: object) -> object:
        self.reached.set()
        self.proceed.wait(REAL_DEADLINE)
        return self._call(*args)


class FlakyBackend:
    """A memory backend whose next write fails with an I/O error."""

    blocking = False

    def __init__(self) -> None:
        self.inner = MemoryBackend()
        self.fail_next = False

    def write(self, batches: Sequence[AppendBatch]) -> list[StoreError | None]:
        if self.fail_next:
            self.fail_next = False
            raise OSError(28, "No space left on device")
        return self.inner.write(batches)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def flush_together(
    store: BufferedStore, sessions: Sequence[Session]
) -> dict[str, StoreError]:
    """Flush *sessions* concurrently (one group inside ``async with``); the errors by id."""
    errors: dict[str, StoreError] = {}

    async def flush(session: Session) -> None:
        try:
            await store.flush(session)
        except StoreError as exc:
            errors[session.id] = exc

    async with trio.open_nursery() as nursery:
        for session in sessions:
            nursery.start_soon(flush, session)
    return errors


async def store_one_turn(store: BufferedStore, session_id: str) -> Session:
    """Store a new session of one finished turn in *store*, opened and closed here."""
    session = Session.create(session_id)
    run_turn(session)
    async with store:
        store.attach_new(session)
    return session


async def load_refusals_as_the_store_closes(
    store: BufferedStore, session_id: str, reached: threading.Event
) -> list[str]:
    """Load *session_id* from *store*, closing the store once *reached* is set (the load's
    claim under way in a worker thread); the codes the load was refused with."""
    refusals: list[str] = []

    async def load() -> None:
        try:
            await store.load(session_id)
        except StoreError as exc:
            refusals.append(str(exc.code))

    async with trio.open_nursery() as nursery, store:
        nursery.start_soon(load)
        await trio.to_thread.run_sync(reached.wait)
    return refusals


async def flush_refusals_as_the_exit_is_cancelled(
    store: BufferedStore, session: Session, reached: threading.Event, *, attach: bool = True
) -> list[str]:
    """Inside *store*, attach *session* (or, with ``attach=False``, attach it as new) and
    flush it; once *reached* is set (the commit under way in a worker thread) cancel the
    store's exit. The codes the flush was refused with."""
    refusals: list[str] = []

    async def flush() -> None:
        try:
            await store.flush(session)
        except StoreError as exc:
            refusals.append(str(exc.code))

    adopt: Callable[[Session], None] = store.attach if attach else store.attach_new
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            async with store:
                adopt(session)
                if attach:
                    run_turn(session, "more")
                nursery.start_soon(flush)
                await trio.to_thread.run_sync(reached.wait)
                scope.cancel()
    return refusals


def count_opens(store: BufferedStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time *store*'s backend opens its storage."""
    backend: Any = store._backend
    opens: list[int] = []
    real_open = backend.open

    def counted_open() -> None:
        opens.append(1)
        real_open()

    monkeypatch.setattr(backend, "open", counted_open)
    return opens


def attach_undrained(store: BufferedStore, session_id: str) -> Session:
    """A session of one turn attached to *store* and not flushed: a close has it to drain."""
    session = Session.create(session_id)
    run_turn(session)
    store.attach_new(session)
    return session


async def enter_noting_refusal(store: BufferedStore, refusals: list[str]) -> None:
    """Enter and leave *store*; the code of a StoreError it is refused with goes to *refusals*."""
    try:
        async with store:
            pass
    except StoreError as exc:
        refusals.append(str(exc.code))


async def close_during_entry(store: BufferedStore) -> StoreError | None:
    """Close *store* while an entry opens it; how the close failed, if it did."""

    async def enter() -> None:
        with contextlib.suppress(StoreError):
            async with store:
                pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(enter)
        await trio.testing.wait_all_tasks_blocked()
        try:
            await store.aclose()
        except StoreError as exc:
            return exc
    return None


def full_disk(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
    """A backend write on a full disk."""
    raise OSError(errno.ENOSPC, "No space left on device")


async def released_create(
    store: BufferedStore, monkeypatch: pytest.MonkeyPatch, session_id: str
) -> Session:
    """A new session with one turn, released by a detach that failed (a full disk) before
    its create was written."""
    session = Session.create(session_id)
    store.attach_new(session)
    run_turn(session, "never stored")
    with monkeypatch.context() as patched:
        patched.setattr(store._backend, "write", full_disk)
        with pytest.raises(StoreError, match="No space left"):
            await store.detach(session)
    return session


async def load_quietly(store: BufferedStore, session_id: str) -> None:
    """Load *session_id* from *store*, whatever the load is refused with."""
    with contextlib.suppress(StoreError):
        await store.load(session_id)


async def close_into(
    store: BufferedStore, scope: trio.CancelScope, outcomes: list[str], ended: trio.Event
) -> None:
    """Close *store* under *scope*, recording how the close ended, then set *ended*."""
    try:
        with scope:
            await store.aclose()
        outcomes.append("cancelled" if scope.cancelled_caught else "ended")
    except StoreError as exc:
        outcomes.append(f"{exc.code}: {exc}")
    finally:
        ended.set()


async def refusal(call: Callable[[], Awaitable[object]]) -> tuple[str, str | None]:
    """The class and code of the retinue error *call* is refused with; fails if it is not."""
    try:
        await call()
    except RetinueError as exc:
        return type(exc).__name__, exc.code
    raise AssertionError("the call was not refused")
