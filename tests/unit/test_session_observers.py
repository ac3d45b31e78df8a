"""A session observer's raise that cannot propagate as it is: a ``SessionError`` naming the
observer, raised once every observer heard the logged event (R4.8, R4.10, R7.45)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

import pytest
import trio

from retinue import SessionError, Text
from retinue._stream import TextDelta
from retinue.session import Event, Session, TurnStart, TurnTrigger, UserMessage
from retinue.session._observers import observer_failure
from tests.helpers import kept_stray_cancelled


class _GaveUp(BaseException):
    """A user's own BaseException subclass, carrying a code as a ``ToolError`` would."""

    code = "GAVE_UP"


def _open() -> Session:
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    return session


def _append(session: Session, path: str) -> None:
    if path == "append":
        session.append(UserMessage((Text("hi"),)), surface="append")
    else:
        session.append_chunk(1, 1, TextDelta(0, "a"))


def _raising(raised: BaseException) -> Callable[[Event], None]:
    def raising_observer(_event: Event) -> None:
        raise raised

    return raising_observer


@pytest.mark.parametrize("path", ["append", "append_chunk"])
@pytest.mark.parametrize("observers", [1, 3])
@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (SystemExit(3), "UNKNOWN"),
        (GeneratorExit(), "UNKNOWN"),
        (_GaveUp("given up"), "GAVE_UP"),
        (StopIteration("done"), "UNKNOWN"),
        (BaseExceptionGroup("many", [SystemExit("child")]), "UNKNOWN"),
    ],
    ids=["SystemExit", "GeneratorExit", "own-subclass", "StopIteration", "group"],
)
def test_an_observer_raise_that_cannot_propagate_is_a_session_error_naming_it(
    path: str, observers: int, raised: BaseException, code: str
) -> None:
    """R4.8, R7.45: the event stays logged, every observer hears it, and the append raises
    a ``SessionError`` naming the observer and what it raised, caused by it; a
    ``SystemExit`` or a ``StopIteration`` escaping the append would end the runtime, or
    reach the appending coroutine as 'coroutine raised StopIteration'."""
    session = _open()
    heard: list[int] = []
    session.observe(_raising(raised))
    for _ in range(observers - 1):
        session.observe(lambda event: heard.append(event.seq))
    with pytest.raises(SessionError) as caught:
        _append(session, path)
    assert caught.value.code == code
    assert "session observer" in caught.value.message
    assert "raising_observer" in caught.value.message
    assert caught.value.__cause__ is raised
    assert len(session.events) == 2
    assert heard == [1] * (observers - 1)


@pytest.mark.parametrize("observers", [1, 2])
async def test_an_observer_cancelled_is_a_session_error_naming_it(observers: int) -> None:
    """R4.8, R7.48: observers are synchronous, so a ``Cancelled`` is their own, even while
    a scope around the append is cancelled: ``STRAY_CANCELLED``, naming the observer."""
    session = _open()
    session.observe(_raising(await kept_stray_cancelled()))
    for _ in range(observers - 1):
        session.observe(lambda _event: None)
    with trio.CancelScope() as outer:  # noqa: ASYNC100 - cancelled, and no checkpoint inside on purpose
        outer.cancel()
        with pytest.raises(SessionError) as caught:
            _append(session, "append")
    assert caught.value.code == "STRAY_CANCELLED"
    assert "raising_observer" in caught.value.message
    assert len(session.events) == 2


def test_ctrl_c_from_an_observer_passes_on_once_every_observer_heard_the_event() -> None:
    """R4.8: Ctrl-C is no observer's failure and propagates as it is, after the later
    observers (the store's buffer, say) heard the logged event, and before an earlier
    observer's failure."""
    session = _open()
    heard: list[int] = []
    interrupt = KeyboardInterrupt()
    session.observe(_raising(RuntimeError("first")))
    session.observe(_raising(interrupt))
    session.observe(lambda event: heard.append(event.seq))
    with pytest.raises(KeyboardInterrupt) as caught:
        _append(session, "append")
    assert caught.value is interrupt
    assert heard == [1]
    assert len(session.events) == 2


def test_failures_an_append_does_not_raise_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """R4.8, R4.10: of several observers' failures the first is raised and the others are
    logged, and a failure before a Ctrl-C is logged as the Ctrl-C passes on: none goes unsaid."""
    session = _open()
    first, second, third = RuntimeError("first"), RuntimeError("second"), RuntimeError("third")
    session.observe(_raising(first))
    session.observe(_raising(second))
    with pytest.raises(RuntimeError) as caught:
        _append(session, "append")
    assert caught.value is first
    logged = [record.exc_info[1] for record in caplog.records if record.exc_info]
    assert logged == [second]
    assert "seq 1 (user/message); another observer's failure is raised instead" in caplog.text

    caplog.clear()
    session = _open()
    session.observe(_raising(third))
    session.observe(_raising(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        _append(session, "append_chunk")
    assert [record.exc_info[1] for record in caplog.records if record.exc_info] == [third]
    assert "seq 1 (assistant/chunk); Ctrl-C is raised instead" in caplog.text


def test_a_lone_observer_ctrl_c_propagates_as_it_is() -> None:
    """R4.8: a lone observer is called directly; its Ctrl-C is raised unchanged."""
    session = _open()
    interrupt = KeyboardInterrupt()
    session.observe(_raising(interrupt))
    with pytest.raises(KeyboardInterrupt) as caught:
        _append(session, "append_chunk")
    assert caught.value is interrupt
    assert len(session.events) == 2


def test_an_observer_exception_is_its_failure_as_it_is() -> None:
    """R4.8: an ``Exception`` (but a ``StopIteration``) is raised from the append unchanged."""
    error = ValueError("bad")
    assert observer_failure("an observer", error) is error
    stop = observer_failure(_async_observer, StopIteration())
    assert isinstance(stop, SessionError)
    assert stop.message == f"session observer {__name__}._async_observer raised StopIteration"


class _Backup:
    """An observer's object whose repr holds a credential."""

    def __repr__(self) -> str:
        return "Backup(postgres://user:SECRET@host/db)"

    def on_event(self, _event: Event) -> None:
        raise SystemExit(1)


def test_an_observer_is_named_by_its_code_not_by_its_objects_repr() -> None:
    """R4.8: the failure of a bound-method observer names the method's code, as a listener's does,
    not the repr of the method's object, which may hold a credential, while the message is stored in
    the turn's end."""
    session = _open()
    session.observe(_Backup().on_event)
    with pytest.raises(SessionError) as caught:
        _append(session, "append")
    assert caught.value.message == (
        f"session observer {__name__}._Backup.on_event raised SystemExit: 1"
    )


def _append_in_thread(session: Session) -> BaseException | None:
    """Append a message from a new thread; what the append raised there, if anything."""
    raised: list[BaseException] = []

    def append() -> None:
        try:
            session.append(UserMessage((Text("from a thread"),)), surface="append")
        except BaseException as exc:  # handed back to the test's thread
            raised.append(exc)

    thread = threading.Thread(target=append)
    thread.start()
    thread.join()
    return raised[0] if raised else None


def test_an_observed_session_refuses_an_append_from_another_thread() -> None:
    """R4.8: observers run where the append runs; from a thread other than the one they
    were attached on (a sync tool's worker, say) the append is refused before it is logged,
    coded ``WRONG_THREAD``. Once no observer is left any thread may append again."""
    session = _open()
    heard: list[int] = []
    unsubscribe = session.observe(lambda event: heard.append(event.seq))
    refused = _append_in_thread(session)
    assert isinstance(refused, SessionError)
    assert refused.code == "WRONG_THREAD"
    assert "appended from a thread other than the one its observers run on" in str(refused)
    assert (len(session.events), heard) == (1, [])
    unsubscribe()
    assert _append_in_thread(session) is None
    assert [event.type for event in session.events] == ["turn/start", "user/message"]


async def _async_observer(_event: Event) -> None:
    await trio.lowlevel.checkpoint()


def _generating(_event: Event) -> Iterator[None]:
    yield


class _Secret:
    """Not callable; its repr holds a credential."""

    def __repr__(self) -> str:
        return "Secret('sk-SECRET')"


class _AsyncCall:
    async def __call__(self, _event: Event) -> None:
        await trio.lowlevel.checkpoint()


def test_an_observer_that_cannot_be_called_synchronously_is_refused_when_it_registers() -> None:
    """R4.8: observers are called synchronously on every append, so one that is not callable would
    make every later append log its event and then raise a bare TypeError, and an async one's
    coroutine would be dropped unawaited. Each is refused by ``observe``, naming it, and the session
    appends as before."""
    session = _open()
    cases: list[tuple[object, str]] = [
        (5, "session observers must be callable, got a value of type int"),
        (_async_observer, f"synchronously: {__name__}._async_observer is async"),
        (_AsyncCall(), f"synchronously: {__name__}._AsyncCall.__call__ is async"),
        (_generating, f"not iterated: {__name__}._generating is a generator function"),
        (_Secret(), "session observers must be callable, got a value of type _Secret"),
    ]
    for observer, message in cases:
        with pytest.raises(TypeError, match=re.escape(message)):
            session.observe(observer)  # type: ignore[arg-type]
    _append(session, "append")
    assert [event.type for event in session.events] == ["turn/start", "user/message"]
