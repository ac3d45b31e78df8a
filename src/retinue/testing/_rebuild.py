"""The request reconstructability check (R8.9): every request is its log, folded.

A development aid, not a hot path: each check re-validates the whole log in
a fresh session, so it costs a replay per model call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from retinue._callables import check_callable
from retinue._lossless import same_json, shown_short
from retinue._request import ModelRequest
from retinue._stream import StreamChunk
from retinue.providers import Model
from retinue.providers._model import is_adapter
from retinue.session import Event, Session, StepStart
from retinue.supervisors import Runtime

from ._invariant import InvariantError

__all__ = ["RebuildCheckedModel", "check_request_rebuild"]


def check_request_rebuild(session: Session, request: ModelRequest) -> None:
    """Check that *request*, being made now, is what *session*'s log rebuilds (R8.9).

    Call it while the request's step is the last one logged (a model's
    ``stream`` does). Replays the log into fresh sessions as R8.8 reads it:
    the messages fold the surface over the events before the step's
    ``step/start``, the header folds every header event so far (the step's
    own included). The request's config, system prompt, tools and messages
    (the header's message prefix, then that history) must equal them.

    Raises:
        InvariantError: the log cannot be replayed, holds no step or no header,
            or a part of the request differs; the message names the part.
    """
    events = list(session.events)
    opened = next((e.seq for e in reversed(events) if isinstance(e.data, StepStart)), None)
    if opened is None:
        raise InvariantError("R8.9: a request was made but the log holds no step/start")
    header = _replay(session, events).current_header
    if header is None:
        raise InvariantError("R8.9: a request was made but the log holds no request header")
    history = _replay(session, events[:opened]).derive_messages()
    expected = {
        "config": header.config,
        "system": header.system,
        "tools": header.tools,
        "messages": tuple(history.with_prefix(header.message_prefix)),
    }
    actual = {
        "config": request.config,
        "system": request.system,
        "tools": request.tools,
        "messages": tuple(request.messages),
    }
    for part, value in expected.items():
        # As JSON: a part the request sends differently (``1.0`` for ``1``) is not the log's.
        if not same_json(actual[part], value):
            raise InvariantError(
                f"R8.9: session {session.id!r}, step opened at seq {opened}: the request's "
                f"{part} differ from the log's rebuild: {actual[part]!r} != {value!r}"
            )


def _replay(session: Session, events: list[Event]) -> Session:
    try:
        return Session.from_events(session.header, events)
    except Exception as error:
        raise InvariantError(f"R8.9: the log cannot be replayed: {error}") from error


class RebuildCheckedModel:
    """A :class:`~retinue.providers.Model` that checks every request against its log.

    *sessions* maps a request's ``session_id`` to the live session that made
    it (its ``None`` skips the check, e.g. for a request made outside an
    agent); :meth:`follow` sets it to a runtime's agents, the usual case::

        model = RebuildCheckedModel(ScriptedModel(...))
        async with retinue.open_runtime(models=model) as rt:
            model.follow(rt)
            ...
        assert model.failures == [] and model.checked > 0

    A request that its log does not rebuild raises :class:`InvariantError`
    from ``stream`` before *model* sees it, and the error is kept in
    :attr:`failures`: the loop contains a failing model call (the turn ends
    ``error``), so a test asserts on the list rather than on the raise. A
    request naming a session while no runtime is followed (``follow``
    forgotten) fails the same way, its error naming ``model.follow(rt)``.
    """

    def __init__(
        self, model: Model, sessions: Callable[[str], Session | None] | None = None
    ) -> None:
        """Wrap *model*, checking the requests of the sessions *sessions* finds.

        Raises:
            TypeError: *model* is no model adapter (a class, say), or *sessions*
                is neither ``None`` nor a synchronous function: either would fail
                every request later, as the turn's error, naming neither.
        """
        if not is_adapter(model):
            raise TypeError(
                f"RebuildCheckedModel needs a model adapter (with stream()), got {model!r}"
            )
        if sessions is not None:
            check_callable(sessions, "sessions", synchronous=True)
        self._model = model
        self._sessions = sessions
        self.checked = 0
        """How many requests were checked."""
        self.failures: list[InvariantError] = []
        """Every failed check, in order."""

    def follow(self, runtime: Runtime) -> None:
        """Check the requests of *runtime*'s agents, finding each by its session id; a request
        of a session no agent of *runtime* has fails the check (the model is shared with
        another runtime, say), where it would go unchecked.

        Raises:
            TypeError: *runtime* is no :class:`~retinue.supervisors.Runtime`: every
                later request would fail its turn naming neither, and none be checked.
        """
        if not isinstance(runtime, Runtime):
            raise TypeError(
                f"follow needs a Runtime (from open_runtime), got {shown_short(runtime)}"
            )

        def session_of(session_id: str) -> Session:
            agent = runtime.agents.get(session_id)
            if agent is None:
                # Passed unchecked, another runtime's agents sharing the model would let
                # ``failures == []`` pass having checked only some requests.
                raise InvariantError(
                    f"R8.9: the request of session {session_id!r} cannot be checked: no agent "
                    "of the runtime the RebuildCheckedModel follows has it; give each runtime "
                    "a RebuildCheckedModel of its own"
                )
            return agent.session

        self._sessions = session_of

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Check *request* (R8.9), then stream it from the wrapped model.

        Raises:
            InvariantError: the log does not rebuild *request*, or *request*
                names a session but no runtime is followed and no *sessions*
                was given, so nothing could check it.
            TypeError: *sessions* returned neither a session nor ``None``.
        """
        try:
            session = self._session_of(request)
            if session is not None:
                self.checked += 1
                check_request_rebuild(session, request)
        except InvariantError as error:
            self.failures.append(error)
            raise
        return self._model.stream(request)

    def _session_of(self, request: ModelRequest) -> Session | None:
        if request.session_id is None:
            return None
        if self._sessions is None:
            # Passing it unchecked would let ``failures == []`` pass having checked nothing.
            raise InvariantError(
                f"R8.9: the request of session {request.session_id!r} cannot be checked: "
                "the RebuildCheckedModel follows no runtime; call model.follow(rt) once "
                "the runtime is open (or pass sessions=)"
            )
        session = self._sessions(request.session_id)
        if session is not None and not isinstance(session, Session):
            # Handed on, it would fail the check on its missing events, naming neither.
            raise TypeError(
                f"sessions({request.session_id!r}) must return a Session or None, "
                f"got {shown_short(session)}"
            )
        return session
