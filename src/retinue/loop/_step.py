"""One step's body (R7.32-R7.36): config, header, model stream, assistant message, tools."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from typing import Any, final

from retinue._content import ContentBlock, Message, ToolCall, ToolResultBlock, as_content
from retinue._errors import HookError, ModelError, failure_of
from retinue._lossless import same_json
from retinue._options import AgentOptions
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest, ToolSchema
from retinue._stream import (
    Aborted,
    Errored,
    Finish,
    FinishReason,
    MaxTokens,
    StreamChunk,
    TextDelta,
)
from retinue.session import (
    AssistantMessage,
    EpochHeader,
    EventData,
    RequestHeader,
    Session,
    make_delta,
)

from ._assembler import BlockAssembler, BlockAssemblyError
from ._core import AgentCore, StepSignal
from ._prompt import request_tools
from ._scheduler import run_tool_calls
from ._state import StepCalls, TurnState

__all__ = ["header_event", "run_step"]

log = logging.getLogger("retinue.loop")


def seed_config(core: AgentCore) -> LlmCallConfig:
    """The config a step starts from (R7.32): options first, then the log's fold."""
    folded = core.session.current_header
    if core.header_anchored and folded is not None:
        return folded.config
    options = core.options
    if options.model is None and folded is not None:
        # Resumed without a model: the stored one goes on, with what the options set.
        return _overlaid(folded.config, options)
    return LlmCallConfig(
        model=options.model or "",
        provider=options.provider,
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        stop=options.stop,
    )


def _overlaid(config: LlmCallConfig, options: AgentOptions) -> LlmCallConfig:
    """*config* with each setting *options* gives (not ``None``) in place of its own."""
    return LlmCallConfig(
        model=config.model,
        provider=config.provider if options.provider is None else options.provider,
        temperature=config.temperature if options.temperature is None else options.temperature,
        max_tokens=config.max_tokens if options.max_tokens is None else options.max_tokens,
        stop=config.stop if options.stop is None else options.stop,
    )


def header_event(session: Session, header: EpochHeader, *, anchored: bool) -> EventData | None:
    """The header event owed before a request, or ``None`` (R8.4)."""
    fold = session.current_header
    if not anchored:
        return RequestHeader(header, "initial" if fold is None else "resume")
    # As JSON, not by ``==``: a change only JSON sees (``true`` to ``1``) is sent, so it is owed.
    if fold is not None and same_json(fold, header):
        return None
    delta = make_delta(fold, header) if fold is not None else None
    return delta if delta is not None else RequestHeader(header, "fallback")


def _same_header(
    core: AgentCore,
    config: LlmCallConfig,
    system: str | None,
    tools: tuple[ToolSchema, ...],
    prefix: tuple[Message, ...],
) -> bool:
    """Whether the anchored header is made of these very parts, so no event is owed.

    The common step: config, tool tuple and prefix are the cached objects the
    last header was built from, and comparing them by identity spares
    building a header to compare field by field.
    """
    fold = core.session.current_header
    return (
        core.header_anchored
        and fold is not None
        and fold.config is config
        and fold.tools is tools
        and fold.message_prefix is prefix
        and fold.system == system
    )


async def _request_config(core: AgentCore, state: TurnState, seed: LlmCallConfig) -> LlmCallConfig:
    return await core.services.hooks.waterfall_value(
        "agent/request", seed, core.agent, state.turn, state.step, seed, scope=core.id
    )


def _no_model(core: AgentCore) -> ModelError:
    return ModelError(
        f"agent {core.id!r} has no model: pass AgentOptions(model=...) or return a "
        "config with a model from an agent/request listener",
        code="NO_MODEL",
    )


async def run_step(
    core: AgentCore,
    state: TurnState,
    boundary: MessageHistory,
    system: str,
    tools: tuple[ToolSchema, ...] | None,
    signal: StepSignal,
) -> FinishReason | None:
    """Run the model call and the tools of one open step; its finish, or ``None`` if aborted.

    Whether tool calls ran is in ``state.calls``: a step with calls has a record of them.

    *tools* is the request's tool list when an assembly listener chose it,
    else ``None`` for the agent's tool view.
    """
    config = seed_config(core)
    if core.services.hooks.hears("agent/request", core.id):
        config = await _request_config(core, state, config)
        if signal.cancel_called:  # a listener cancelled: no model call for an aborted step
            return None
    if not config.model:
        raise _no_model(core)
    prefix = core.prefix or ()
    if tools is None:
        tools = request_tools(core)
    system_text = system or None
    if not _same_header(core, config, system_text, tools, prefix):
        header = EpochHeader(config, system_text, tools, prefix)
        owed = header_event(core.session, header, anchored=core.header_anchored)
        core.header_anchored = True
        if owed is not None:
            core.session.append(owed)
            # An observer of the header cancelled: no model call for an aborted step.
            if signal.cancel_called:
                return None  # noqa: ASYNC910 - per step, no yield on abort: the turn closes as interrupted
    messages = boundary.with_prefix(prefix) if prefix else boundary
    # Positional: a class called with keywords is given them as a dict, built per call.
    request = ModelRequest(config, messages, system_text, tools, core.id)
    streamed = await _stream(core, state, request, signal)
    if streamed is None:
        return None
    return await _finish_step(core, state, *streamed, signal)


async def _stream(
    core: AgentCore, state: TurnState, request: ModelRequest, signal: StepSignal
) -> tuple[BlockAssembler, list[int]] | None:
    """Feed and log the model's stream up to its finish; ``None`` if the step was aborted."""
    session, turn, step = core.session, state.turn, state.step
    assembler = BlockAssembler()
    seqs: list[int] = []
    # Bound once: these run for every chunk of the stream.
    logged, append_chunk, feed = seqs.append, session.append_chunk, assembler.feed
    try:
        chunks = reader = _opened(core, request)
        try:
            reader = _reader(chunks)
            async for chunk in reader:
                if signal.cancel_called:
                    break  # the usage of a failed finish read so far still counts
                if (
                    type(chunk) is TextDelta
                    and chunk.index is assembler._text_index
                    and type(text := chunk.text) is str
                ):
                    # feed's own first case, inlined: most chunks are text deltas
                    # extending the open text block, and a call each costs more.
                    assembler._text_parts.append(text)
                    logged(append_chunk(turn, step, chunk))
                    continue
                # Fed first: the assembler refuses a malformed chunk before it is
                # logged, as a logged one would make the stored session unloadable.
                try:
                    feed(chunk)
                except BlockAssemblyError as error:
                    if error.code != "MALFORMED_CHUNK":
                        # Any other refusal is of a storable chunk: logged as it came (R7.36).
                        logged(append_chunk(turn, step, chunk))
                    raise
                logged(append_chunk(turn, step, chunk))
                if type(chunk) is Finish:
                    break  # its end (R10.2): one held open after it would hold the turn
        except BaseException:
            await _closed_after_failure(reader)
            raise
        await _closed(reader)  # the stream itself, if it made no iterator
    except BaseException as exc:
        _note_failed_usage(state, assembler)
        # Judged as a listener's or a tool body's: only Ctrl-C and a real cancel go
        # on. Its own Cancelled would end the agent as if disposed, and a SystemExit
        # or a BaseException of its own the runtime with every agent in it.
        if not isinstance(exc, Exception):
            raise failure_of(exc, "the model stream", ModelError) from exc
        raise
    return _streamed(state, assembler, seqs, signal)


def _streamed(
    state: TurnState, assembler: BlockAssembler, seqs: list[int], signal: StepSignal
) -> tuple[BlockAssembler, list[int]] | None:
    """What :func:`_stream` returns once the stream ended: raises the model's failure."""
    # The assembler's field, not its property: read every step, where a property is a call.
    finish = assembler._finish
    if isinstance(finish, _FAILED):
        _note_failed_usage(state, assembler)
        if signal.cancel_called:
            return None
        raise _failed(finish)
    if signal.cancel_called:
        return None
    return assembler, seqs


def _note_failed_usage(state: TurnState, assembler: BlockAssembler) -> None:
    """Count the usage of a stream that ended ``finish{error|aborted}``: no message carries
    it (R7.36), and a crashed turn's answer, read back from the log, counts it too."""
    if isinstance(assembler.finish, _FAILED):
        state.note_usage(assembler.usage)


def _opened(core: AgentCore, request: ModelRequest) -> AsyncIterator[StreamChunk]:
    """The model's stream for *request*, refused at once if it is no async iterable."""
    chunks = core.services.models.stream(request)
    if not hasattr(chunks, "__aiter__"):
        raise _not_a_stream(chunks)
    return chunks


def _reader(chunks: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
    """The iterator *chunks* makes, taken once: what the step reads and closes.

    The stream may be an iterable whose ``__aiter__`` makes the iterator (a
    generator) that holds the call; closing the iterable would leave that open.
    An iterator with ``__anext__`` alone, which ``async for`` over its iterable
    takes, is read through :class:`_Reading`.
    """
    iterator = chunks.__aiter__()
    if hasattr(type(iterator), "__aiter__"):
        return iterator
    if not hasattr(type(iterator), "__anext__"):
        raise ModelError(
            f"the model's stream's __aiter__ returned a {type(iterator).__name__}, "
            "not an async iterator of chunks",
            code="NOT_A_STREAM",
        )
    return _Reading(iterator)


@final
class _Reading:
    """An iterator with ``__anext__`` alone, read by ``async for`` and closed as its own."""

    __slots__ = ("_iterator", "aclose")

    def __init__(self, iterator: Any) -> None:
        self._iterator = iterator
        self.aclose = getattr(iterator, "aclose", None)

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> StreamChunk:
        return await self._iterator.__anext__()  # type: ignore[no-any-return]


async def _closed(chunks: AsyncIterator[StreamChunk]) -> None:  # noqa: ASYNC910 - a plain iterator has nothing to close, and the stream checkpointed
    """Close *chunks*: it releases the call (an SDK stream's HTTP response) at once, even
    when the loop stopped early; a plain iterator has nothing to close."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


async def _closed_after_failure(chunks: AsyncIterator[StreamChunk]) -> None:  # noqa: ASYNC910 - as _closed
    """:func:`_closed`, for a stream whose reading failed: a failure of the close itself
    (an SDK whose response fails to release) is logged, as the stream's own failure is
    what ends the turn."""
    try:
        await _closed(chunks)
    except Exception:
        log.warning("closing a failed model stream failed too", exc_info=True)


_FAILED = (Errored, Aborted)


def _not_a_stream(returned: object) -> ModelError:
    """The model's ``stream`` returned no async iterator: a coroutine, most likely."""
    message = (
        f"the model's stream(request) returned a {type(returned).__name__}, "
        "not an async iterator of chunks"
    )
    if inspect.iscoroutine(returned):
        returned.close()  # never to be awaited: closed, Python does not warn of it
        message += ": an async def stream needs a yield, to be an async generator"
    return ModelError(message, code="NOT_A_STREAM")


def _failed(finish: FinishReason) -> ModelError:
    """The model's failure its stream ended with (R7.36)."""
    if isinstance(finish, Errored):
        return ModelError(finish.message, code=finish.code)
    return ModelError("model stream aborted", code="ABORTED")


def _chunk_run(seqs: list[int]) -> range | list[int] | None:
    """The step's chunk seqs as its message's sources: a range when they are one run.

    They are unless an observer logged an event between two chunks; the session
    checks a range by its ends, another sequence item by item.
    """
    if not seqs:
        return None
    first, last = seqs[0], seqs[-1]
    # Ascending, as each append returned the log's length: a run if none is missing.
    return range(first, last + 1) if last - first == len(seqs) - 1 else seqs


def _refuse_shared_ids(
    calls: tuple[ToolCall, ...], model_content: tuple[ContentBlock, ...] | None
) -> None:
    """Results are matched to calls by id: two calls sharing one cannot both be answered.

    *model_content*: as :func:`_calls_of`; the model is named when its own message already
    gave two calls the id, whatever a listener changed besides.
    """
    if len(calls) < 2:
        return
    seen: set[str] = set()
    for call in calls:
        if call.id in seen:
            by_model = model_content is None or _calls_with_id(model_content, call.id) > 1
            problem = f"gives two tool calls the same id {call.id!r}"
            raise _refusal(problem, "DUPLICATE_TOOL_CALL_ID", by_model=by_model)
        seen.add(call.id)


def _calls_with_id(content: tuple[ContentBlock, ...], call_id: str) -> int:
    return sum(1 for block in content if isinstance(block, ToolCall) and block.id == call_id)


def _calls_of(
    content: tuple[ContentBlock, ...], model_content: tuple[ContentBlock, ...] | None
) -> tuple[ToolCall, ...]:
    """The tool calls of the step's message, which holds no tool result.

    A tool result is the step's ``tool/result``: held by the assistant's message, it
    would be sent as the assistant's in every later request, which providers refuse
    (Anthropic) or send without it (OpenAI). *model_content* is the model's content when
    ``agent/step-result`` listeners made *content* of it, else ``None``: a refused
    block equal to one of the model's own names the model, any other the listener.
    """
    calls: list[ToolCall] = []
    for index, block in enumerate(content):
        if isinstance(block, ToolCall):
            calls.append(block)
        elif isinstance(block, ToolResultBlock):
            # By value, as the repeated ids are counted: a listener copying the model's
            # blocks (attrs.evolve) hands back the model's block.
            by_model = model_content is None or block in model_content
            problem = (
                f"holds a tool-result block (content[{index}]), which only a tool/result holds"
            )
            raise _refusal(problem, "INVALID_STREAM", by_model=by_model)
    return tuple(calls)


def _refusal(problem: str, code: str, *, by_model: bool) -> Exception:
    """The error for the step's message that *problem*, naming whoever made it."""
    if by_model:
        return ModelError(f"the model's message {problem}", code=code)
    return HookError(f"agent/step-result returned a message that {problem}")


def _without_tool_calls(content: tuple[ContentBlock, ...]) -> tuple[ContentBlock, ...]:
    if not any(isinstance(block, ToolCall) for block in content):
        return content
    return tuple(block for block in content if not isinstance(block, ToolCall))


async def _step_result(
    core: AgentCore, state: TurnState, content: tuple[ContentBlock, ...]
) -> tuple[ContentBlock, ...]:
    """The content of the message the agent/step-result listeners make of the assembled one."""
    message = Message("assistant", content)
    result = await core.services.hooks.waterfall_value(
        "agent/step-result", message, core.agent, state.turn, state.step, message, scope=core.id
    )
    try:
        return as_content(result.content)
    except TypeError as exc:
        raise HookError(
            f"agent/step-result returned a message with invalid content: {exc}"
        ) from exc


async def _finish_step(
    core: AgentCore,
    state: TurnState,
    assembler: BlockAssembler,
    seqs: list[int],
    signal: StepSignal,
) -> FinishReason | None:
    # The assembler's fields, not its properties: read every step, where a property is a call.
    finish, usage = assembler._finish, assembler._usage
    cut = isinstance(finish, MaxTokens)
    # Blocks, not a message: only a step-result listener is given the message.
    content = assembler.blocks()
    if cut:
        content = _without_tool_calls(content)
    # The model's content, when listeners made another of it: a refusal of the
    # message names whoever made the refused block.
    model_content: tuple[ContentBlock, ...] | None = None
    if core.services.hooks.hears("agent/step-result", core.id):
        model_content = content
        content = await _step_result(core, state, content)
        if cut:
            content = _without_tool_calls(content)
    calls = _calls_of(content, model_content)
    if len(calls) > 1:
        _refuse_shared_ids(calls, model_content)
    if content or usage is not None:
        message = AssistantMessage(state.turn, state.step, content, usage)
        # Noted before the append: an observer raising on it leaves the message
        # logged, its text the turn's answer.
        state.note_answer(content, usage)
        # Appended here rather than by a helper: it runs every step. Recorded within the
        # try: Ctrl-C landing between the append and the record still has the calls the
        # log holds answered.
        try:
            core.session.append_message(message, _chunk_run(seqs))
            if calls:
                state.calls = StepCalls(calls)
        except BaseException:
            state.note_calls_if_logged(message, calls)
            raise
    if not calls:
        return finish  # noqa: ASYNC910 - the step's model stream was its schedule point
    contexts = await run_tool_calls(core, state, signal)
    if contexts is None:
        return None
    for context in contexts:
        core.inject(context.content, context.source)
    return finish
