"""ScriptedModel: a deterministic ``Model`` that plays script steps, one per stream."""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from operator import length_hint
from typing import TypeAlias, final

import attrs
import trio

from retinue._callables import is_async
from retinue._content import ToolCall
from retinue._errors import ModelError
from retinue._fresh_errors import fresh_error
from retinue._lossless import shown_short
from retinue._request import ModelRequest
from retinue._stream import BlockEnd, StreamChunk, ToolCallDelta, Usage
from retinue.testing._steps import (
    CallTools,
    Plan,
    Reply,
    Step,
    ToolCallSpec,
    not_a_step,
    plan_of,
    require_count,
)
from retinue.testing._tool_loop import ToolLoop, tool_names_of

__all__ = [
    "Script",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ScriptedModelStatistics",
    "StepFunction",
]

StepFunction: TypeAlias = Callable[[ModelRequest], Step]
"""A script as a function: called with each request, it returns the step to play."""
SingleScript: TypeAlias = Sequence[Step] | StepFunction
Script: TypeAlias = SingleScript | Mapping[str, SingleScript]
"""What a :class:`ScriptedModel` plays: steps in order, a step function, or either per model
name (the key ``None`` for any other model)."""


class ScriptExhaustedError(ModelError):
    """A scripted model was called more often than its script has steps."""

    code: str | None = "SCRIPT_EXHAUSTED"


@final
@attrs.frozen
class ScriptedModelStatistics:
    """A snapshot of a :class:`ScriptedModel`'s activity."""

    calls: int
    """Streams started (one per ``stream()`` iteration begun)."""
    chunks: int
    """Chunks yielded over all streams."""
    remaining: int | None
    """Steps left in sequence scripts (summed), or ``None`` if any script is a function."""


@attrs.define(eq=False)
class _Cursor:
    """One script and how far it has been played."""

    steps: tuple[Step, ...] | None
    function: StepFunction | None
    position: int = 0

    @classmethod
    def of(cls, script: SingleScript, name: str | None) -> _Cursor:
        if callable(script):
            if is_async(script):
                # Called synchronously per stream: each call would make a coroutine
                # that never runs, and fail the stream naming none of this.
                raise TypeError(
                    f"{_script_name(name)} is an async function; a step function is "
                    "called synchronously: def step(request) -> Step"
                )
            return cls(None, script)
        # A lone step is the likely mistake; iterating it would say only "not iterable".
        if isinstance(script, Step):
            raise TypeError(
                f"{_script_name(name)} is a single step; "
                f"pass a list of steps, [{type(script).__name__}(...)]"
            )
        if not isinstance(script, Iterable):
            raise TypeError(
                f"{_script_name(name)} must be a sequence of steps or a function "
                f"(request) -> step, got {shown_short(script)}"
            )
        steps = tuple(script)
        for index, step in enumerate(steps):
            if not isinstance(step, Step):
                raise TypeError(f"step {index} of {_script_name(name)}: {not_a_step(step)}")
        return cls(steps, None)

    def next(self, request: ModelRequest, *, repeat_last: bool, name: str | None) -> Step:
        if self.function is not None:
            return self._call(request, name)
        assert self.steps is not None
        if self.position < len(self.steps):
            step = self.steps[self.position]
            self.position += 1
            return step
        if repeat_last and self.steps:
            return self.steps[-1]
        asking = "" if request.session_id is None else f" (asked by session {request.session_id!r})"
        raise ScriptExhaustedError(
            f"{_script_name(name)} has {len(self.steps)} step(s) and all were played{asking}; "
            "add steps or pass repeat_last=True"
        )

    def _call(self, request: ModelRequest, name: str | None) -> Step:
        assert self.function is not None
        step = self.function(request)
        if not isinstance(step, Step):
            if inspect.iscoroutine(step):
                step.close()  # never to run: closed, it raises no "never awaited" warning
            function = getattr(self.function, "__qualname__", repr(self.function))
            raise TypeError(
                f"the step function {function} of {_script_name(name)}: {not_a_step(step)}"
            )
        return step

    @property
    def upcoming(self) -> Step | None:
        """The step the next stream plays, if the script is a sequence with one left."""
        if self.steps is None or self.position >= len(self.steps):
            return None
        return self.steps[self.position]

    @property
    def remaining(self) -> int | None:
        if self.steps is None:
            return None
        return len(self.steps) - self.position


def _request_bound(value: object) -> int | None:
    """*value* as the bound of the request record, checked before the record is built.

    A validator would run only after the record's ``deque(maxlen=...)`` had
    failed on it with a message naming neither the parameter nor the fix.

    Raises:
        TypeError: *value* is neither ``None`` nor an ``int``.
        ValueError: *value* is negative.
    """
    if value is None:
        return None
    require_count("keep_requests", value, least=0)
    assert isinstance(value, int)
    return value


def _script_name(name: str | None) -> str:
    return "the script" if name is None else f"the script for model {name!r}"


def _cursors(script: Script) -> dict[str | None, _Cursor]:
    if not isinstance(script, Mapping):
        return {None: _Cursor.of(script, None)}
    # Typed as str, but a caller's mapping may hold anything.
    names: Iterable[object] = script.keys()
    for name in names:
        # A request names its model by a str: any other key would never be played.
        if name is not None and not isinstance(name, str):
            raise TypeError(
                f"a script mapping is keyed by model name (a str), got the key {shown_short(name)}"
            )
    return {name: _Cursor.of(one, name) for name, one in script.items()}


def _something_to_repeat(
    instance: ScriptedModel, _attribute: attrs.Attribute[bool], value: object
) -> None:
    # A str such as "no" is truthy: taken as it is, it would repeat the last step.
    if not isinstance(value, bool):
        raise TypeError(f"repeat_last must be True or False, got {shown_short(value)}")
    if not value:
        return
    for name, cursor in instance._cursors.items():
        if cursor.steps == ():
            # Nothing to repeat: every call would fail, so refuse the script now.
            raise ValueError(
                f"repeat_last=True needs a last step, but {_script_name(name)} is empty"
            )


@final
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class ScriptedModel:
    """A deterministic model for tests, demos and benchmarks; implements ``Model``.

    ``script`` is a sequence of steps played in order (one per ``stream()``), a
    function ``(request) -> step``, or a mapping from model name to either (the
    key ``None`` scripts every model not named); a request for a model with no
    script raises :class:`ScriptExhaustedError` naming the models scripted.
    Past the end of a sequence, the stream raises :class:`ScriptExhaustedError`
    unless ``repeat_last=True`` (which refuses an empty sequence: there is no
    last step). A sequence holding, or a function returning, anything but a
    step raises ``TypeError`` naming the script. The last ``keep_requests`` requests (default
    1000; ``None`` keeps all) are recorded in :attr:`requests`: a load test of
    many agents would otherwise hold every history it ever sent.

    Chunks are pre-built per step. A stream with zero delays checkpoints once,
    before its first chunk, and then yields without further checkpoints.
    """

    _cursors: dict[str | None, _Cursor] = attrs.field(alias="script", converter=_cursors)
    repeat_last: bool = attrs.field(default=False, kw_only=True, validator=_something_to_repeat)
    # Read through the keep_requests property: the bound is the deque's, fixed when built.
    _keep_requests: int | None = attrs.field(
        default=1000, kw_only=True, alias="keep_requests", converter=_request_bound
    )
    _requests: deque[ModelRequest] = attrs.field(init=False)
    _calls: int = attrs.field(default=0, init=False)
    # Chunks yielded by the streams that have ended, and each stream still
    # playing: its chunk iterator and how many chunks it holds.
    _chunks: int = attrs.field(default=0, init=False)
    _playing: dict[Iterator[StreamChunk], int] = attrs.field(factory=dict, init=False)

    @classmethod
    def tool_loop(
        cls,
        tool_names: Sequence[str],
        *,
        calls_per_step: int = 2,
        answer_chunks: int = 20,
        answer: str = "All tools returned; here is the answer.",
        arguments: Mapping[str, str] | None = None,
        usage: Usage | None = None,
        delay: float = 0.0,
        keep_requests: int | None = 1000,
    ) -> ScriptedModel:
        """Build a model that calls tools after a prompt and answers after results.

        If a history message after the last assistant message holds tool
        results (hook context may follow them), it answers ``answer`` in
        ``answer_chunks`` deltas (``len(answer)`` if that is fewer: a delta
        holds at least one character); otherwise it asks for
        ``calls_per_step`` calls, cycling through *tool_names*, with
        ``arguments[name]`` (default ``"{}"``) as each call's JSON arguments.
        *keep_requests* bounds the requests recorded, as the constructor's does.

        Raises:
            ValueError: *tool_names* is empty, a count is below 1 (*keep_requests*
                below 0), or *arguments* names a tool not in *tool_names*.
            TypeError: *tool_names* is a ``str`` or no sequence (a set has no
                order to cycle through), a name is no ``str`` (a tool itself,
                say), *arguments* is no mapping, or a count is not an ``int``.
        """
        tool_names = tool_names_of(tool_names)
        if not tool_names:
            raise ValueError("tool_loop needs at least one tool name")
        # Checked here, not only by the steps, so the error names these parameters.
        require_count("calls_per_step", calls_per_step)
        require_count("answer_chunks", answer_chunks)
        given = arguments or {}
        # Pairs in a list would be read as unknown names below, naming the wrong fault.
        if not isinstance(given, Mapping):
            raise TypeError(f"arguments must map tool names to JSON text, got {shown_short(given)}")
        # A misspelt name would leave its tool called with "{}", unnoticed. Sorted by repr:
        # keys of several types (a str and an int) do not compare.
        unknown = sorted(set(given) - set(tool_names), key=repr)
        if unknown:
            raise ValueError(f"arguments names tools not in tool_names: {unknown}")
        specs = [
            ToolCallSpec(name, given.get(name, "{}"))
            for name in (tool_names[k % len(tool_names)] for k in range(calls_per_step))
        ]
        call = CallTools(specs, usage=usage, delay=delay)
        reply = Reply(answer, chunks=answer_chunks, usage=usage, delay=delay)
        return cls(ToolLoop(call, reply), keep_requests=keep_requests)

    @_requests.default
    def _request_log(self) -> deque[ModelRequest]:
        return deque(maxlen=self._keep_requests)

    @property
    def keep_requests(self) -> int | None:
        """How many of the latest requests :attr:`requests` keeps (``None``: all); read-only.

        Set when the model is built: a later assignment would not resize the record.
        """
        return self._requests.maxlen

    @property
    def requests(self) -> list[ModelRequest]:
        """The requests received so far, in order, at most the last ``keep_requests`` (a copy)."""
        return list(self._requests)

    def statistics(self) -> ScriptedModelStatistics:
        """Return a snapshot of calls, chunks and remaining steps."""
        remaining = [cursor.remaining for cursor in self._cursors.values()]
        total = None if None in remaining else sum(r for r in remaining if r is not None)
        return ScriptedModelStatistics(self._calls, self._yielded(), total)

    def _yielded(self) -> int:
        """Chunks yielded so far: a playing stream has yielded each chunk its iterator gave."""
        playing = sum(total - length_hint(left) for left, total in self._playing.items())
        return self._chunks + playing

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` if a sequence script has unplayed steps.

        The message names each such script, how many steps it has left and the
        next one, as the test that missed them would want to read it.
        """
        unplayed = [
            f"{_script_name(name)} has {cursor.remaining} left, the next "
            f"{shown_short(cursor.upcoming)}"
            for name, cursor in self._cursors.items()
            if cursor.remaining
        ]
        if unplayed:
            raise AssertionError(f"unplayed script steps: {'; '.join(unplayed)}")

    # One checkpoint per stream, not per chunk (flake8-async ASYNC911 flags this on purpose):
    # benchmarks measure the runtime, not this double.
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:  # noqa: ASYNC911 - one checkpoint per stream; the consumer's step checkpoints
        """Play the next step for *request*.

        Waits the step's ``delay`` (or checkpoints once), then yields its
        chunks, sleeping ``chunk_delay`` before each. The step is taken, and
        the request recorded, as the stream starts, as a provider counts a
        request sent: a stream cancelled before its first chunk has used its
        step, and the next request plays the one after. Cancellation while
        waiting or hanging ends the stream; nothing else is left behind.

        Raises:
            ScriptExhaustedError: the script has no step left for this model.
        """
        self._requests.append(request)
        self._calls += 1
        step = self._step(request)
        plan = plan_of(step)
        chunks = _with_ids(plan, self._calls) if plan.id_slots else plan.chunks
        if step.delay > 0:
            await trio.sleep(step.delay)
        else:
            await trio.lowlevel.checkpoint()
        if step.chunk_delay > 0:
            for chunk in chunks:
                await trio.sleep(step.chunk_delay)
                self._chunks += 1
                yield chunk
        else:
            # Counted from the iterator's position, not per chunk: nothing
            # awaits between taking a chunk and yielding it.
            left = iter(chunks)
            self._playing[left] = len(chunks)
            try:
                for chunk in left:
                    yield chunk  # noqa: ASYNC911 - zero-delay chunks: one checkpoint per stream, not per chunk
            finally:
                del self._playing[left]
                self._chunks += len(chunks) - length_hint(left)
        if plan.ending == "raise":
            assert plan.error is not None
            raise fresh_error(plan.error)
        if plan.ending == "hang":
            await trio.sleep_forever()

    def _step(self, request: ModelRequest) -> Step:
        name: str | None = request.model
        cursor = self._cursors.get(name)
        if cursor is None:
            cursor = self._cursors.get(None)
            name = None
        if cursor is None:
            scripted = ", ".join(repr(known) for known in self._cursors) or "no model"
            raise ScriptExhaustedError(
                f"no script for model {request.model!r}; the scripts are for {scripted}"
            )
        return cursor.next(request, repeat_last=self.repeat_last, name=name)

    def __repr__(self) -> str:
        return f"<ScriptedModel calls={self._calls} chunks={self._yielded()}>"


def _with_ids(plan: Plan, stream_number: int) -> list[StreamChunk]:
    """Copy *plan*'s chunks, giving its id-less tool calls ids unique to this stream."""
    chunks = list(plan.chunks)
    for ordinal, delta_at, delta, end_at, call in plan.id_slots:
        call_id = f"call_{stream_number}_{ordinal}"
        while call_id in plan.named_ids:
            # A call of the step is given this id: a second would fail the turn.
            call_id += "_"
        chunks[delta_at] = ToolCallDelta(delta.index, call_id, delta.arguments_delta, delta.name)
        if end_at is not None:
            chunks[end_at] = BlockEnd(delta.index, ToolCall(call_id, call.name, call.arguments))
    return chunks
