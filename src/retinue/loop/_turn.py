"""One turn (R7.9-R7.31): open, prompts, the step loop, close and flush."""

from __future__ import annotations

import logging
from typing import TypeAlias

import trio

from retinue._content import Message, snapshot_messages
from retinue._errors import HookError, StepLimitError, call_each, is_interrupt
from retinue._request import MessageHistory, ToolSchema
from retinue._sources import USER_SOURCE
from retinue._stream import FinishReason
from retinue.hooks import Allow, Block, Continue, Stop
from retinue.mailbox import MailboxItem
from retinue.session import (
    PromptBlocked,
    SteeringMessage,
    StepStart,
    TurnStart,
    TurnTrigger,
    UserMessage,
)

from ._answers import rejected, settle_batch
from ._core import (
    AgentCore,
    StepSignal,
    TurnResult,
    abort_reason,
    abort_step,
    retire_step,
)
from ._flush import flush as flush, flush_shielded as flush_shielded
from ._prompt import ASSEMBLE, request_prompt, static_prompt
from ._state import NO_CALLS, TurnState
from ._step import run_step

__all__ = ["run_turn"]

log = logging.getLogger("retinue.loop")

_ALLOW: Allow | Block = Allow()
_CONTINUE: Continue | Stop = Continue()
_STOP: Continue | Stop = Stop()


async def run_turn(core: AgentCore, state: TurnState, items: list[MailboxItem]) -> bool:
    """Run turn *state* over the drained *items*; returns whether it was terminally stopped.

    *state* is fresh, numbered the log's next turn. A failure before
    ``turn/start`` is logged propagates to the driver's backstop (R7.7); any
    later failure ends the turn, never the driver.
    """
    if not items:
        raise RuntimeError("a turn started with nothing queued")
    try:
        try:
            await _turn_body(core, state, items)
        except Exception as exc:
            if not _turn_logged(state):
                raise
            _close_failed(state, exc, aborted=state.core.disposed)
        # Within the guard: Ctrl-C landing just before it closes the turn as interrupted.
        state.close_turn()
    except BaseException as exc:
        # An Exception here escaped the handler above: a bug, whose turn the
        # supervisor closes as a crash (DESIGN 4). A cancellation from outside
        # (the runtime's teardown, Ctrl-C) ends the turn here. Any other
        # BaseException (a group holding Ctrl-C beside a failure; the model's,
        # an observer's, a listener's or a tool body's own is its failure) goes
        # on too, as trio has it, but is logged as what ended the turn, not as
        # a disposal.
        # Ctrl-C ends the runtime: every other agent stops at its next checkpoint (its
        # turn ending disposed), not once this one has closed and flushed.
        core.services.end_on_interrupt(exc)
        if _turn_logged(state) and not isinstance(exc, Exception):
            state.interruption = exc  # raised again after a crash in the close
            _close_interrupted(state, exc)
            # The checkpoint still runs, as after a dispose (R2.36, R7.42), and before
            # the driver exits, so before the teardown's agent/disposed and detach
            # (R12.9). Ctrl-C too: the runtime's exit is as shielded on its way out,
            # and flush_timeout bounds the wait. A failed flush is reported (R7.49),
            # never raised in place of what interrupted the turn.
            try:
                await _flush_and_settle(core, state, items, interrupted=True)
            except BaseException as ending:
                _pass_on_held(state, exc, ending)
                raise
            _pass_on_held(state, exc)
        raise
    try:
        await _flush_and_settle(core, state, items)
    except BaseException as ending:
        _pass_on_held(state, None, ending)
        raise
    if state.ctrl_c is not None:
        _pass_on_held(state, None)
    return state.terminal


def _pass_on_held(
    state: TurnState, unwinding: BaseException | None, ending: BaseException | None = None
) -> None:
    """Raise the Ctrl-C the turn's close held back, unless *unwinding* (what ended the
    turn) holds one: it wins over a cancel. A bug *ending* the flush goes on instead, to
    the crash path, which raises the held Ctrl-C once it has reported the crash."""
    if isinstance(ending, Exception):
        return
    # Taken off the state, whose frames its traceback holds: kept, the two are a cycle.
    ctrl_c, state.ctrl_c = state.ctrl_c, None
    if ctrl_c is not None and (unwinding is None or not is_interrupt(unwinding)):
        raise ctrl_c


async def _flush_and_settle(
    core: AgentCore, state: TurnState, items: list[MailboxItem], *, interrupted: bool = False
) -> None:
    """Flush the closed turn (R7.49), then answer its prompts with the logged end.

    *interrupted*: a cancel from outside (or Ctrl-C) ended the turn and unwinds the driver.
    """
    run = flush_shielded if interrupted else flush
    try:
        await run(core, state.turn, state.step)
    except BaseException as exc:
        if not isinstance(exc, Exception):
            # A cancel from outside that cuts the flush short leaves the logged turn/end
            # as it is: the prompts get that answer, not the driver's "disposed". (A bug
            # is the supervisor's: it answers them once it has flushed the turn.)
            state.interruption = exc
            core.services.end_on_interrupt(exc)  # the store's own Ctrl-C, bare or grouped
            _settle(state, items)
        raise
    _settle(state, items)


_INTERRUPTIONS = (trio.Cancelled, KeyboardInterrupt)
# What ended a step whose calls a failure left without results, as they tell the model.
_INTERRUPTED_BY_FAILURE = "interrupted by a failure"


def _cancellation(exc: BaseException) -> bool:
    """Whether *exc* interrupts from outside (a cancel, Ctrl-C), or is a group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(_INTERRUPTIONS)[1] is None
    return isinstance(exc, _INTERRUPTIONS)


def _turn_logged(state: TurnState) -> bool:
    """Whether this turn's ``turn/start`` is in the log (R7.47 decides from the log)."""
    return state.core.session.last_turn == state.turn


def _close_failed(state: TurnState, error: Exception, *, aborted: bool) -> None:
    """Close the step a failure ended; the turn ends ``error``, or interrupted when the
    step was *aborted* (R7.22), disposed when the agent was (R7.39)."""
    if not aborted:
        # Recorded first (R7.45): an observer failing on the closing events came after it.
        state.record_error(error)
    state.answer_dangling_calls("INTERNAL", _INTERRUPTED_BY_FAILURE)
    state.close_step()
    if aborted:
        state.set_interrupted()


def _close_interrupted(state: TurnState, interruption: BaseException) -> None:
    """Close the turn a cancel from outside, Ctrl-C or another BaseException ended."""
    cancelled = _cancellation(interruption)
    if not cancelled:
        state.record_error(interruption)
    state.set_interrupted()
    if cancelled:
        state.answer_dangling_calls("ABORTED", "cancelled")
    else:
        state.answer_dangling_calls("INTERNAL", _INTERRUPTED_BY_FAILURE)
    try:
        state.close_step()
    except BaseException as exc:
        # Ctrl-C from a step/end observer: held, so the turn is closed all the same
        # (nothing else closes it once a cancel from outside unwinds the driver).
        state.hold_interrupt(exc)
    state.close_turn()


def _settle(state: TurnState, items: list[MailboxItem]) -> None:
    """Answer the batch's prompts with how the turn ended."""
    result = TurnResult(state.turn, state.reason, state.text, state.usage, state.hand_on_error())
    settle_batch(items, result, state.blocked)


# The trigger of a turn the user's prompts open, shared by every such turn: a frozen
# value, where one built per turn would be one more object each turn's log retains
# for the cyclic collector to traverse.
_USER_TRIGGER = TurnTrigger("message", USER_SOURCE)


async def _turn_body(core: AgentCore, state: TurnState, items: list[MailboxItem]) -> None:  # noqa: ASYNC910 - per turn; an abort may end it before any yield, and the driver's mailbox wait is a schedule point after every turn
    source = items[0].source
    trigger = _USER_TRIGGER if source is USER_SOURCE else TurnTrigger("message", source)
    core.session.append(TurnStart(state.turn, trigger))
    # One cancel scope for the whole turn: each window's StepSignal aborts it,
    # and an abort always ends the turn, so per-step scopes would add nothing.
    scope = trio.CancelScope()
    signal = StepSignal(core, scope)
    if core.disposed or core.cancel_marker:
        # A turn/start observer cancelled before this window's signal existed:
        # prompt-submit must see the abort too, or a batch it blocks ends rejected.
        abort_step(signal)
    core.turn_scope = scope
    try:
        with scope:
            # The step loop runs here rather than in a helper: every coroutine
            # between it and the step forwards each of the step's yields.
            if await _prompts_accepted(core, state, items, signal):
                while await _step_iteration(core, state, scope):
                    pass
    except Exception:
        # A failure raised while an abort unwound (a listener raising after it cancelled,
        # say; a tool's own failure is its result) reaches here, grouped with the Cancelled
        # the scope caught or alone: R7.22 makes the step aborted, not an error. Logged.
        if not scope.cancel_called:
            raise
        log.exception(
            "agent %s: turn %d failed while aborted (its end stays the abort)", core.id, state.turn
        )
    finally:
        core.turn_scope = None
    if scope.cancel_called:
        # An abort whose Cancelled unwound a step: close it as interrupted.
        state.close_aborted_step(abort_reason(core))


async def _prompts_accepted(
    core: AgentCore, state: TurnState, items: list[MailboxItem], signal: StepSignal
) -> bool:
    """Submit the prompts in their window (W3); whether the turn goes on to its steps."""
    try:
        allowed = await _submit_prompts(core, state, items)
    finally:
        retire_step(signal)
    if _aborted(core, signal):
        state.set_interrupted()
        return False
    return allowed


async def _submit_prompts(core: AgentCore, state: TurnState, items: list[MailboxItem]) -> bool:
    """Run prompt-submit per item (R7.11, R7.12); returns whether any prompt was allowed."""
    hooks, session = core.services.hooks, core.session
    last_block: str | None = None
    allowed = 0
    for index, item in enumerate(items):
        # An unheard seam is not awaited: the await costs a coroutine per prompt.
        decision = _ALLOW
        if hooks.hears("agent/prompt-submit", core.id):
            decision = await hooks.waterfall_value(
                "agent/prompt-submit", _ALLOW, core.agent, item.content, item.source, scope=core.id
            )
        if isinstance(decision, Block):
            session.append(PromptBlocked(item.content, item.source, decision.reason))
            state.note_blocked(index, decision.reason)
            last_block = decision.reason
            continue
        allowed += 1
        content = decision.content if decision.content is not None else item.content
        session.append(UserMessage(content, item.source), surface="append")
        if decision.additional_context is not None:
            context = decision.additional_context
            core.inject(context.content, context.source)
    if not allowed:
        state.reason = rejected(last_block)
    return allowed > 0  # noqa: ASYNC910 - per turn, inside the step scope; a checkpoint would let a cancel drop the prompts


def _drain_steering(core: AgentCore, state: TurnState) -> bool:
    """Log every steering message; an observer's failure is raised once all are logged.

    Whether there was any; asked twice a step, and steering is rare: a caller asks
    ``mailbox.has_steering`` first, sparing the call.
    """
    mailbox = core.mailbox
    if not mailbox.has_steering:
        return False
    items = mailbox.drain_steering()
    session, turn = core.session, state.turn
    call_each(
        lambda item: session.append(
            SteeringMessage(turn, item.content, item.source), surface="append"
        ),
        items,
    )
    return True


async def _session_prefix(core: AgentCore, signal: StepSignal) -> bool:
    """Compose the session prefix, once per driver (R7.18); ``False`` if aborted (Check B)."""
    seed: tuple[Message, ...] = ()
    composed = await core.services.hooks.waterfall_value(
        "agent/session-prefix", seed, core.agent, seed, signal, scope=core.id
    )
    if signal.cancel_called or core.disposed:
        return False
    try:
        messages = snapshot_messages(composed)
    except TypeError as exc:
        raise HookError(f"agent/session-prefix must return a sequence of Message: {exc}") from exc
    core.prefix = messages
    return True


def _aborted(core: AgentCore, signal: StepSignal) -> bool:
    return signal.cancel_called or core.disposed


async def _step_iteration(core: AgentCore, state: TurnState, scope: trio.CancelScope) -> bool:
    """One step of the loop (R7.14-R7.31); returns whether the turn continues."""
    state.step += 1
    if core.mailbox.has_steering:
        _drain_steering(core, state)
    signal = StepSignal(core, scope)
    if core.cancel_marker or core.disposed:
        abort_step(signal)
    finish: FinishReason | None = None
    try:
        # The step runs here rather than in a helper: every coroutine between the
        # turn and the step forwards each of the step's yields.
        # Seams nobody listens to are skipped rather than awaited: each await of a
        # seam costs a coroutine even when it returns at once.
        hooks = core.services.hooks
        prompt: _Prompt | None
        if core.prefix is None or hooks.hears(ASSEMBLE, core.id) or hooks.hears(_PRE_STEP, core.id):
            prompt = await _step_prompt(core, state, signal)
        else:
            prompt = static_prompt(core), None
        if prompt is not None:
            boundary = _open_step(core, state, signal)
            if boundary is not None:
                finish = await run_step(core, state, boundary, prompt[0], prompt[1], signal)
    except Exception as exc:
        retire_step(signal)
        if not state.step_open:
            raise
        _close_failed(state, exc, aborted=_aborted(core, signal))
        return False  # noqa: ASYNC910 - per step; a failed step ends the turn, and the driver's mailbox wait follows
    finally:
        retire_step(signal)
    if finish is None or signal.cancel_called or core.disposed:  # _aborted, written out
        state.close_aborted_step(signal.reason)
        return False  # noqa: ASYNC910 - per step, no yield on abort: the turn closes as interrupted
    return await _after_step(core, state, finish)


# A step's system prompt, and its tool list when an assembly listener chose it.
_Prompt: TypeAlias = tuple[str, tuple[ToolSchema, ...] | None]
_PRE_STEP = "agent/pre-step"


async def _step_prompt(core: AgentCore, state: TurnState, signal: StepSignal) -> _Prompt | None:
    """The step's system prompt and tools, through the listeners that hear them, once the
    session prefix is composed; ``None`` if aborted meanwhile."""
    hooks = core.services.hooks
    if hooks.hears(ASSEMBLE, core.id):
        system, tools = await request_prompt(core)
    else:
        system, tools = static_prompt(core), None
    if _aborted(core, signal):
        return None  # noqa: ASYNC910 - per step, no yield on abort: the turn closes as interrupted
    if core.prefix is None and not await _session_prefix(core, signal):
        return None  # noqa: ASYNC910 - aborted while composing: the turn closes as interrupted
    if hooks.hears(_PRE_STEP, core.id):
        await hooks.serial(
            _PRE_STEP,
            core.agent,
            state.turn,
            state.step,
            system,
            core.prefix,
            signal,
            scope=core.id,
        )
    return system, tools  # noqa: ASYNC910 - per step; an abort by a listener is seen as the step opens


def _open_step(core: AgentCore, state: TurnState, signal: StepSignal) -> MessageHistory | None:
    """Log ``step/start``; the history the step's request is built on, or ``None`` if
    the step was aborted before it opened or by a ``step/start`` observer."""
    if signal.cancel_called or core.disposed:  # _aborted written out: asked every step
        return None
    session = core.session
    boundary = session.derive_messages()
    state.step_open = True
    state.calls = NO_CALLS
    session.append(StepStart(state.turn, state.step))
    if _aborted(core, signal):
        return None
    return boundary


async def _after_step(core: AgentCore, state: TurnState, finish: FinishReason) -> bool:
    """Fold max-tokens, steering, continuation and turn-stop (R7.23-R7.31, R7.37), and
    the agent's ``max_steps``."""
    if finish.kind == "max-tokens":
        state.note_max_tokens()
    limit = core.options.max_steps
    last = limit is not None and state.step >= limit
    if last:
        # A turn's last step takes no steering: what came meanwhile is the next turn's
        # prompt. Steering coming later (from a listener) is as any turn's: a turn-stop drops it.
        core.mailbox.requeue_steering()
    steered = not last and core.mailbox.has_steering and _drain_steering(core, state)
    state.close_step()
    if state.error_recorded:
        return False  # noqa: ASYNC910 - per step; a recorded error ends the turn, and the driver's mailbox wait follows
    # Only a step whose message had tool calls keeps a record of them.
    decision: object = _CONTINUE if (state.calls.calls or steered) else _STOP
    hooks = core.services.hooks
    if hooks.hears("agent/turn-continuation", core.id):
        decision = await hooks.waterfall_value(
            "agent/turn-continuation", decision, core.agent, state.turn, decision, scope=core.id
        )
    cancelled = core.cancel_marker or core.disposed
    # A cancel has cleared the FIFOs for good (R2.25): a reason from the turn it ended
    # must not become the next prompt, nor one nudging a turn on past its last step.
    if isinstance(decision, Continue) and decision.reason is not None and not (cancelled or last):
        core.mailbox.steer(MailboxItem(decision.reason.content, decision.reason.source))
    should_continue = isinstance(decision, Continue) or core.mailbox.has_steering
    verdict = None
    if hooks.hears("agent/turn-stop", core.id):
        verdict = await hooks.strict_serial(
            "agent/turn-stop", core.agent, state.turn, scope=core.id
        )
    if verdict is not None:
        core.mailbox.drain_steering()
        state.terminal = True
        should_continue = False
    if core.cancel_marker or core.disposed:
        state.set_interrupted()
        return False  # noqa: ASYNC910 - per step; the turn ends, and the driver's mailbox wait follows
    if last and should_continue:
        if isinstance(decision, Continue):  # the model's tool calls, or a listener, want a step
            state.record_error(_step_limit(core, state))
        return False  # noqa: ASYNC910 - per step; the turn ends, and the driver's mailbox wait follows
    return should_continue  # noqa: ASYNC910 - per step; seams nobody listens to add no schedule point, and the next step's stream is one


def _step_limit(core: AgentCore, state: TurnState) -> StepLimitError:
    """The error of a turn that would take a step past its agent's ``max_steps``."""
    wanted = "the model's tool calls" if state.calls.calls else "a turn-continuation listener"
    return StepLimitError(
        f"agent {core.id!r}: turn {state.turn} ran its max_steps ({core.options.max_steps}), "
        f"and {wanted} asked for another step"
    )
