"""The append-only session log: append-before-notify, seq invariants, folds (SPEC 4)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import final

import attrs

from retinue._errors import InvalidJsonError, SessionError
from retinue._lossless import JsonValue, shown, writable_int
from retinue._request import MessageHistory
from retinue._stream import StreamChunk

from ._checks import (
    as_events,
    check_boundary,
    check_chunk_event,
    exact_op,
    folded,
    fork_seed,
    own_parts,
    refuse_outside_turn,
    refuse_seed_event,
    refuse_surface_op,
    refuse_thread,
)
from ._event_appends import append_boundary, append_message, append_to_surface
from ._event_kinds import BOUNDARY_TYPES, EVENT_TYPES, HEADER_TYPES, PLAIN_TYPES, SURFACE_DATA
from ._eventlog import EventLog
from ._events import (
    AssistantChunk,
    CustomEvent,
    EpochHeader,
    Event,
    EventData,
    PromptBlocked,
    Replace,
    SessionHeader,
    StepEnd,
    StepStart,
    SurfaceOp,
    ToolCallEvent,
    TurnEnd,
    TurnStart,
)
from ._history import Surface
from ._observers import Announcer, Observer, check_observer
from ._sources import as_sources, check_sources
from ._stepcheck import STEP_TYPES, check_step
from ._stepledger import StepLedger

__all__ = ["Session", "now_ms"]

_time_ns = time.time_ns
_get_ident = threading.get_ident
_new_tuple = tuple.__new__


def now_ms() -> int:
    """Wall-clock epoch milliseconds."""
    return _time_ns() // 1_000_000


@final
@attrs.define(eq=False)
class Session:
    """An append-only event log with its surface and header folds.

    All methods are synchronous and never block: persistence only buffers.
    """

    # Read through ``header``, which has no setter: immutable (R4.1), as a store tracks
    # the session by its id. (A frozen field would give every attribute set of an
    # append a Python-level __setattr__.)
    _header: SessionHeader
    _events: list[Event] = attrs.field(factory=list, init=False)
    # One live view of the list, which is never replaced: read on every step.
    _log: EventLog = attrs.field(
        default=attrs.Factory(lambda self: EventLog(self._events), takes_self=True), init=False
    )
    # Keyed by a token per registration: an unsubscriber removes its own, never
    # another registration of the same (or an equal) observer.
    _observers: dict[object, Observer] = attrs.field(factory=dict, init=False)
    # Every append announces through it; its notify is one callable (usually the
    # store's buffer itself), a no-op without observers: a session is observed by
    # its store, which a test for none on every append would only slow down.
    _announcer: Announcer = attrs.field(factory=Announcer, init=False)
    # The thread the observers were attached on (the trio thread, in a runtime) while
    # any observe. Appended from another thread, the observers would run there, where
    # waking a trio task corrupts the run, and the append would race the owner's for a seq.
    _thread: int | None = attrs.field(default=None, init=False)
    _surface: Surface = attrs.field(factory=Surface, init=False)
    _last_turn: int = attrs.field(default=0, init=False)
    _turn_open: bool = attrs.field(default=False, init=False)
    # The step open in the open turn (None between steps) and the last one it opened.
    _open_step: int | None = attrs.field(default=None, init=False)
    _last_step: int = attrs.field(default=0, init=False)
    _header_fold: EpochHeader | None = attrs.field(default=None, init=False)
    # What the open step logged: what it may log next (R7.34, R7.36, R9.10, R4.15, R9.17).
    _ledger: StepLedger = attrs.field(factory=StepLedger, init=False)

    @classmethod
    def create(
        cls,
        session_id: str,
        *,
        cwd: str | None = None,
        seed: Iterable[Event] = (),
        parent_session: str | None = None,
        created_at: int | None = None,
    ) -> Session:
        """Build a session, optionally seeded with validated events (R4.24).

        Raises:
            SessionError: *cwd* is not an absolute path str (``INVALID_CWD``), or
                another header field is of a type no store can write and load
                back (``INVALID_HEADER``); a seed event breaks an invariant.
            InvalidJsonError: a seed event holds a value no store can write.
        """
        # Tested as a str first: isabs would take bytes or a path, which the
        # header's line cannot hold, and raise a bare TypeError for anything else.
        given: object = cwd  # a value built in Python may be anything, a str subclass too
        if given is not None and (not isinstance(given, str) or not os.path.isabs(given)):
            raise SessionError(
                f"cwd must be an absolute path (a str): {shown(cwd)}", code="INVALID_CWD"
            )
        seed_events = list(as_events(session_id, seed))
        header = SessionHeader(
            id=session_id,
            created_at=now_ms() if created_at is None else created_at,
            cwd=cwd,
            parent_session=parent_session,
            seed_length=len(seed_events) if parent_session is not None else None,
        )
        return cls.from_events(header, seed_events)

    @classmethod
    def from_events(
        cls, header: SessionHeader, events: Iterable[Event], *, chunks_checked: bool = False
    ) -> Session:
        """Rebuild a session from stored events, validating each; emits nothing.

        A store's loader passes *chunks_checked*: its decoder built every chunk
        by the rules a chunk is checked by here, so it is not checked twice.

        Raises:
            SessionError: an item is not an :class:`Event` (``INVALID_EVENT``); its
                seq is not the int equal to its index (``SEQ_GAP``); its time is
                not an int a store can write (``INVALID_TIME``); or it breaks
                another invariant: the message names its seq and type.
            InvalidJsonError: an event holds a value no store can write and load
                back (a chunk is checked here; every other event when built).
        """
        if type(header) is not SessionHeader:
            raise SessionError(
                f"a session's header must be a SessionHeader, got {shown(header)}",
                code="INVALID_HEADER",
            )
        session = cls(header)
        logged = session._events
        for event in as_events(header.id, events):
            index = len(logged)
            # Exact types (R4.24, R1.6): ``True`` or ``1.0`` compares equal to an
            # index but encodes as no JSON integer, and the stored line would not load.
            if type(event) is not Event:
                raise SessionError(
                    f"session {header.id!r}: seed item {index} is not an Event: {shown(event)}",
                    code="INVALID_EVENT",
                )
            time_ms = event.time
            # Exact types for the same reason; the refusal finds out what is wrong.
            if (
                type(event.seq) is not int
                or event.seq != index
                or type(time_ms) is not int
                or not writable_int(time_ms)
            ):
                refuse_seed_event(header.id, index, event)
            try:
                copied = own_parts(event)
                fold = session._validate(copied, check_chunk=not chunks_checked)
            except SessionError as exc:
                kind = getattr(event.data, "type", type(event.data).__name__)
                raise SessionError(
                    f"event seq {event.seq} ({kind}): {exc.message}", code=exc.code
                ) from exc
            except InvalidJsonError as exc:
                # Its message starts with the event's type already.
                raise InvalidJsonError(f"event seq {event.seq}: {exc.message}") from exc
            session._record(copied, fold)
        if session._open_step is not None:
            session._ledger.rebuild(logged)
        return session

    @property
    def header(self) -> SessionHeader:
        """The session's header: id, creation time, cwd, parent (R4.1; never replaced)."""
        return self._header

    @property
    def id(self) -> str:
        """The session id (equal to its agent's id)."""
        return self._header.id

    @property
    def events(self) -> EventLog:
        """The log, as a read-only live sequence."""
        return self._log

    @property
    def is_turn_open(self) -> bool:
        """Whether the last turn boundary in the log is a ``turn/start`` (R4.17)."""
        return self._turn_open

    @property
    def last_turn(self) -> int:
        """The turn number of the last ``turn/start`` in the log, else 0 (R4.16)."""
        return self._last_turn

    def next_turn_number(self) -> int:
        """The next turn number, derived from the log (R4.16)."""
        return self._last_turn + 1

    @property
    def current_header(self) -> EpochHeader | None:
        """The folded request header (R8.3), or ``None`` before the first."""
        return self._header_fold

    @property
    def surface_generation(self) -> int:
        """Increases on every surface replace (R4.21)."""
        return self._surface.generation

    def derive_messages(self) -> MessageHistory:
        """Return the model-visible history as an immutable snapshot (SPEC 5); O(1)."""
        return self._surface.snapshot()

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Call *observer* synchronously after every append; returns an unsubscriber.

        The unsubscriber removes this registration only, and is idempotent:
        *observer* may be observing more than once.

        Raises:
            TypeError: *observer* is not callable, or is async: appends call it
                synchronously.
        """
        check_observer(observer)
        token = object()
        if not self._observers:
            self._thread = _get_ident()
        self._observers[token] = observer
        # A tuple: appends iterate it without copying it.
        self._announcer.observers(tuple(self._observers.values()))

        def unsubscribe() -> None:
            if self._observers.pop(token, None) is not None:
                self._announcer.observers(tuple(self._observers.values()))
                if not self._observers:
                    self._thread = None

        return unsubscribe

    def append(
        self,
        data: EventData,
        *,
        surface: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event:
        """Validate, log, then notify observers (append-before-notify, R4.8).

        If an observer raises, the exception propagates but the event is logged;
        one that cannot propagate as it is (a ``SystemExit``, a ``StopIteration``, a
        ``Cancelled``) is raised as a ``SessionError`` naming the observer
        (:func:`~retinue.session._observers.observer_failure`). Appended by an
        observer, the event is logged at once and announced once every observer
        heard the one being announced, so each hears the log in seq order; an
        observer's failure on it is raised by the append being announced.

        Raises:
            SessionError: the session is observed and this is not the thread its
                observers were attached on (``WRONG_THREAD``): nothing is logged.
        """
        thread = self._thread
        if thread is not None and thread != _get_ident():
            refuse_thread(self.id)
        events = self._events
        data_type = type(data)
        if surface is None and source_event_seqs is None and data_type in PLAIN_TYPES:
            # The per-step hot path: these types need no checks beyond their own and
            # the step rules, and the tuple is built without the named tuple's __new__.
            if data_type is StepStart:
                # The valid case tested inline; check_step says what is wrong.
                if not (
                    self._open_step is None
                    and self._turn_open
                    and data.turn == self._last_turn  # type: ignore[union-attr]
                    and data.step == self._last_step + 1  # type: ignore[union-attr]
                ):
                    check_step(data, self._open_turn(), self._open_step, self._last_step)
                self._open_step = self._last_step = data.step  # type: ignore[union-attr]
                self._ledger.open(len(events))
            elif data_type is PromptBlocked:
                if not self._turn_open:
                    refuse_outside_turn(PromptBlocked.type)
            elif not (
                # A step is open only inside the open turn: no test of _turn_open.
                data.step == self._open_step  # type: ignore[union-attr]
                and data.turn == self._last_turn  # type: ignore[union-attr]
            ):
                check_step(data, self._open_turn(), self._open_step, self._last_step)
            if data_type is ToolCallEvent:
                self._ledger.call(data, len(events))  # type: ignore[arg-type]
            elif data_type is StepEnd:
                ledger = self._ledger
                if len(ledger.answered) != len(ledger.positions):
                    ledger.close()  # says which call is unanswered
            event = _new_tuple(Event, (len(events), _time_ns() // 1_000_000, data, None, None))
            events.append(event)
            if data_type is StepEnd:
                self._open_step = None
        elif surface is None and source_event_seqs is None and data_type in BOUNDARY_TYPES:
            event = self._append_boundary(data)  # type: ignore[arg-type]
        elif (
            # Each step's messages and results. An exact str: its ``==`` is the
            # opposite of the ``!=`` _validate tests, as a subclass's need not be.
            type(surface) is str
            and surface == "append"
            and data_type in SURFACE_DATA
            and self._turn_open
        ):
            event = self._append_to_surface(data, data_type, surface, source_event_seqs)
        else:
            sources = None if source_event_seqs is None else as_sources(source_event_seqs)
            event = _new_tuple(
                Event, (len(events), _time_ns() // 1_000_000, data, sources, exact_op(surface))
            )
            fold = self._validate(event)
            if data_type in STEP_TYPES or (
                data_type in HEADER_TYPES and self._open_step is not None
            ):
                self._in_step(event)
            self._record(event, fold)
        announcer = self._announcer
        direct = announcer.direct
        if direct is None:
            announcer.announce(event)
        else:
            direct(event)
        return event

    def _in_step(self, event: Event) -> None:
        """Refuse a step's *event* unless the open step may log it next (the step ledger)."""
        data = event.data
        if type(data) in HEADER_TYPES:
            self._ledger.header(self._events, data)
        else:
            self._ledger.admit(self._events, data, event)

    # Written in _event_appends.py, called as methods: the same lookup per append.
    _append_boundary = append_boundary
    _append_to_surface = append_to_surface
    append_message = append_message

    def append_chunk(self, turn: int, step: int, chunk: StreamChunk) -> int:
        """Append an ``assistant/chunk`` event and notify observers; returns its seq.

        ``append(AssistantChunk(turn, step, chunk))`` without its checks: the
        loop's path for every stream chunk, which the loop checks itself before
        logging (its assembler refuses a malformed chunk). The caller vouches
        that *turn* and *step* are ints and *chunk* a storable stream chunk;
        one that is not is logged, and refused when a store encodes it or the
        log is forked or rebuilt from its events. It vouches too that it appends
        on the thread the observers were attached on, as the loop does.
        """
        events = self._events
        seq = len(events)
        data = _new_tuple(AssistantChunk, (turn, step, chunk))
        event = _new_tuple(Event, (seq, _time_ns() // 1_000_000, data, None, None))
        events.append(event)
        announcer = self._announcer
        direct = announcer.direct
        if direct is None:
            announcer.announce(event)
        else:
            direct(event)
        return seq

    def append_custom(self, event_type: str, data: JsonValue) -> Event:
        """Append a plugin event type; *data* must be lossless JSON (R4.5, R4.11).

        Unlike a built-in event, it may be logged between turns (a setup
        restoring a plugin's state, say); it belongs to no turn.

        Raises:
            InvalidJsonError: *data* is not lossless JSON; the message names the type.
            SessionError: *event_type* is empty or a built-in type's name
                (``INVALID_EVENT_TYPE``).
        """
        try:
            custom = CustomEvent(event_type, data)
        except ValueError as exc:
            raise SessionError(str(exc), code="INVALID_EVENT_TYPE") from exc
        return self.append(custom)

    def dump(self) -> list[dict[str, object]]:
        """Return the log as JSON-ready dicts, one per event (the JSONL line shape)."""
        from ._codec import dump_event

        return [dump_event(event) for event in self._events]

    def fork(self, child_id: str, boundary: int | None = None) -> Session:
        """Copy events ``0..boundary`` into a new session (R4.25).

        Raises:
            SessionError: *boundary* is not an existing seq (``INVALID_BOUNDARY``;
                only an omitted one forks an empty source) or inside a turn: not a
                ``turn/end`` or a plugin event between turns (``OPEN_TURN``);
                *child_id* is not a str (``INVALID_HEADER``).
            InvalidJsonError: the copied events hold a chunk no store can write
                (one ``append_chunk`` was given unchecked).
        """
        if boundary is None and not self._events:
            # Only an omitted boundary forks an empty source: no seq can be named.
            return self._child(child_id, [])
        return self._child(child_id, fork_seed(self._events, boundary))

    def _child(self, child_id: str, seed: list[Event]) -> Session:
        """A new session seeded with *seed*, forked from this one (R4.25)."""
        # Not through create, which judges a cwd by this system's rules: the
        # inherited one is absolute by either's, as a loaded header may be.
        header = SessionHeader(
            id=child_id,
            created_at=now_ms(),
            cwd=self._header.cwd,
            parent_session=self.id,
            seed_length=len(seed),
        )
        return Session.from_events(header, seed)

    def _validate(self, event: Event, *, check_chunk: bool = True) -> EpochHeader | None:
        """Refuse *event* unless it may be logged next; return the header fold after it.

        The fold is computed here, not when recording, so a delta that cannot
        fold is refused before it is logged or notified (R4.5).
        """
        data = event.data
        data_type = type(data)
        op = event.surface_op
        if data_type in SURFACE_DATA:
            # One test for the common case; the refusal finds out what is wrong.
            # Exact: an object equal to everything (mock.ANY) would pass a bare ``!=``.
            if not self._turn_open or (
                type(op) is not Replace and (type(op) is not str or op != "append")
            ):
                refuse_surface_op(data.type, op, turn_open=self._turn_open)
        elif data_type not in EVENT_TYPES:
            raise SessionError(f"{data_type.__name__} is not event data", code="INVALID_EVENT_DATA")
        else:
            if data_type is AssistantChunk and check_chunk:
                check_chunk_event(data)  # type: ignore[arg-type]
            if op is not None:
                raise SessionError(
                    f"{data.type} cannot carry a surface op", code="INVALID_SURFACE_OP"
                )
        sources = event.source_event_seqs
        if sources is not None:
            check_sources(data.type, sources, event.seq)
        if data_type in BOUNDARY_TYPES:
            check_boundary(
                data,
                turn_open=self._turn_open,
                last_turn=self._last_turn,
                open_step=self._open_step,
            )
        elif data_type in STEP_TYPES and type(op) is not Replace:
            check_step(data, self._open_turn(), self._open_step, self._last_step)
        elif data_type in HEADER_TYPES:
            if not self._turn_open:
                refuse_outside_turn(data.type)
            return folded(self._header_fold, data)  # type: ignore[arg-type]
        elif data_type is PromptBlocked and not self._turn_open:
            refuse_outside_turn(data.type)
        elif isinstance(op, Replace):
            self._surface.check(event)
        return self._header_fold

    def _open_turn(self) -> int | None:
        return self._last_turn if self._turn_open else None

    def _record(self, event: Event, header_fold: EpochHeader | None) -> None:
        """Log a validated *event*; *header_fold* is what :meth:`_validate` returned."""
        data = event.data
        self._events.append(event)
        self._header_fold = header_fold
        if event.surface_op is not None:
            self._surface.apply(event)
        elif isinstance(data, TurnStart):
            self._last_turn = data.turn
            self._turn_open = True
            self._last_step = 0
        elif isinstance(data, TurnEnd):
            self._turn_open = False
        elif isinstance(data, StepStart):
            self._open_step = self._last_step = data.step
        elif isinstance(data, StepEnd):
            self._open_step = None

    def __repr__(self) -> str:
        return f"<Session {self.id!r} events={len(self._events)} turn_open={self._turn_open}>"
