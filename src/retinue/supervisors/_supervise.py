"""Driver supervision: a crashed driver (a bug) is reported and restarted on its log."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import final

import attrs
import trio

from retinue._checks import finite_number_error
from retinue._errors import ConfigError, only_cancels
from retinue._lossless import shown_short
from retinue.loop import AgentCore, answer_crashed, crash_reason, run_flusher, run_loop
from retinue.loop._crash import CrashedBatch
from retinue.loop._flush import flush_shielded
from retinue.session import Event, Session, ToolErrorInfo, TurnEndReason
from retinue.stores import closing_events

__all__ = ["RestartPolicy", "supervise"]

log = logging.getLogger("retinue.supervisors")


def _check_positive(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    # bool is an int: True seconds is a typo, not a duration.
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(
            f"RestartPolicy.{attribute.name} must be a positive number, got {shown_short(value)}"
        )
    if attribute.name != "window" and finite_number_error(value) is not None:
        # An int too large for a float is no pause a clock can wait either.
        raise ConfigError(
            f"RestartPolicy.{attribute.name} must be finite, got {shown_short(value)}"
        )


# Seconds, as the shortest period an Erlang supervisor takes. A window shorter than a
# crashed driver takes to restart and crash again (microseconds for one that crashes as
# it starts, more in a busy runtime) forgets each crash before the next: each restart
# then comes at once, never given up, and the driver crashes in a loop that spins the CPU.
_SHORTEST_WINDOW = 1.0


def _check_window(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    _check_positive(instance, attribute, value)
    assert isinstance(value, int | float)
    if value < _SHORTEST_WINDOW:
        raise ConfigError(
            f"RestartPolicy.window must be at least {_SHORTEST_WINDOW:g} second, got "
            f"{shown_short(value)}: a shorter one forgets a crash before the restarted "
            "driver can crash again, and restarts a driver that crashes as it starts for good"
        )


def _check_count(_instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"RestartPolicy.{attribute.name} must be a non-negative integer, got {shown_short(value)}"
        )


@final
@attrs.frozen
class RestartPolicy:
    """How a runtime restarts an agent whose driver crashed (a bug in retinue, not a failing turn).

    The first crash is restarted at once. A crash while earlier ones are still
    within ``window`` waits before its restart: ``backoff`` seconds, doubled
    for each further crash in the window, never more than ``max_backoff``.
    More than ``max_restarts`` crashes within ``window`` dispose the agent.
    The window counts the driver's running time, not the pauses, so a driver
    that crashes as soon as it starts is given up after ``max_restarts + 1``
    crashes however long its pauses have grown. Disposing the agent ends a
    pause at once. A cancel in a driver's pause is served as it lands: its
    prompts are answered ``aborted`` and the agent goes ``idle`` (unless
    something was sent after it), and the driver restarts when the pause ends.

    Attributes:
        window: Seconds of running time a crash is remembered; at least 1
            (``math.inf``: every crash counts).
        max_restarts: Restarts allowed within ``window``; ``0`` never restarts.
        backoff: Pause before the second restart within the window; positive.
        max_backoff: Longest pause; finite and at least ``backoff``.

    Raises:
        ConfigError: a field is out of range; the message names it.
    """

    window: float = attrs.field(default=60.0, validator=_check_window)
    max_restarts: int = attrs.field(default=1, validator=_check_count)
    backoff: float = attrs.field(default=0.5, validator=_check_positive)
    max_backoff: float = attrs.field(default=30.0, validator=_check_positive)

    def __attrs_post_init__(self) -> None:
        if self.max_backoff < self.backoff:
            raise ConfigError(
                f"RestartPolicy.max_backoff ({shown_short(self.max_backoff)}) "
                f"must be at least backoff ({shown_short(self.backoff)})"
            )

    def pause(self, crashes: int) -> float:
        """Seconds to wait before restarting after the *crashes*-th crash within the window."""
        if crashes <= 1:
            return 0.0
        doublings = crashes - 2
        # Compared in logarithms: past the doubling that reaches max_backoff the pause
        # is max_backoff, however far apart the two are (their ratio may overflow,
        # and so may backoff * 2.0 ** n for a large max_restarts).
        if doublings >= math.log2(self.max_backoff) - math.log2(self.backoff):
            return self.max_backoff
        return min(self.max_backoff, math.ldexp(self.backoff, doublings))


# KI-protected, as trio's own code is (Ctrl-C coming while its lines run is handed to the
# main task), with the loops it runs unprotected: however the driver's task ends, it ends
# through the finally below, which the teardown waits for.
@trio.lowlevel.enable_ki_protection
async def supervise(core: AgentCore, policy: RestartPolicy) -> None:
    """Run the agent's driver and its flusher; restart either after a crash.

    A turn failure never reaches here (the driver contains it); an exception
    that does is a bug. The open turn is closed ``error`` with code
    ``DRIVER_CRASH``, the crash reported on ``agent/error``, the prompts of its
    batch answered with what the log says once the turn is flushed, and a fresh
    driver instance resumes on the same log, after the pause *policy* sets,
    unless the agent has been disposed (its driver then just ends). A crash
    of the flusher is the agent's crash too (DESIGN 4): reported on
    ``agent/error`` and counted in the same window, it restarts the flusher,
    or disposes the agent, as *policy* says; it never reaches the runtime.
    """
    core.enter_driver()
    crashes = _Crashes(policy)
    flusher_stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_flush, core, crashes, flusher_stop)
            # Awaited here, not through a helper: every coroutine above the
            # driver forwards each of its yields, several a step.
            await _keep_running(core, crashes, lambda: run_loop(core), _recover_driver, driver=True)
            flusher_stop.set()
            core.flush_wanted.set()
    finally:
        # No recovery reads them now: kept, their frames would hold the agent's last stacks.
        core.driver_interruption = core.flusher_interruption = None
        # Only now: the agent is quiescent once its flusher, too, has finished (R12.9).
        core.driver_exited.set()


@attrs.define(eq=False)
class _Crashes:
    """An agent's crashes within its policy's window, its driver's and its flusher's alike.

    The window counts running time: the time since supervision began, less
    the time in which a restart pause was under way.
    """

    policy: RestartPolicy
    _times: list[float] = attrs.field(factory=list)  # running time at each remembered crash
    _origin: float = attrs.field(factory=trio.current_time)
    _paused: float = 0.0  # pause time ended so far
    _pausing: int = 0  # pauses under way
    _pause_began: float = 0.0

    def _uptime(self) -> float:
        now = trio.current_time()
        paused = self._paused + (now - self._pause_began if self._pausing else 0.0)
        return now - self._origin - paused

    def record(self) -> int:
        """Remember a crash now; the number of crashes within the window."""
        uptime = self._uptime()
        self._times[:] = [t for t in self._times if uptime - t < self.policy.window]
        self._times.append(uptime)
        return len(self._times)

    async def pause(self, core: AgentCore, seconds: float, *, driver: bool) -> None:
        """Wait *seconds* before a restart, its time left out of the window's uptime."""
        if self._pausing == 0:
            self._pause_began = trio.current_time()
        self._pausing += 1
        try:
            await _pause(core, seconds, driver=driver)
        finally:
            self._pausing -= 1
            if self._pausing == 0:
                self._paused += trio.current_time() - self._pause_began


_Recover = Callable[[AgentCore, Exception, int, RestartPolicy], Awaitable[bool]]
"""Handles a crash (the error, the crashes in the window, the policy); whether to restart."""


async def _flush(core: AgentCore, crashes: _Crashes, stop: trio.Event) -> None:
    """Run flusher instances until one returns or the policy gives the agent up (DESIGN 4)."""
    try:
        await _keep_running(
            core, crashes, lambda: run_flusher(core, stop), _recover_flusher, driver=False
        )
    finally:
        # No flusher runs any more (given up, or cancelled in a pause): release whoever
        # waits on rounds none will serve. A flusher that returned has done so already.
        core.flush_rounds.stop()


@trio.lowlevel.disable_ki_protection  # the driver's and flusher's own code, as any task's
async def _keep_running(
    core: AgentCore,
    crashes: _Crashes,
    run: Callable[[], Awaitable[None]],
    recover: _Recover,
    *,
    driver: bool,
) -> None:
    """Run *run* again after each crash until it returns or *recover* gives the agent up."""
    while True:
        try:
            await run()
            return
        except Exception as exc:
            crash = exc
        # Recovered out of the handler: raised in it, what the task was unwinding
        # would take the crash as its context, the reverse of what happened.
        count = crashes.record()
        try:
            restart = await recover(core, crash, count, crashes.policy)
        except Exception:
            log.exception("recovering agent %s after a crash failed; disposing it", core.id)
            _dispose(core)
            restart = False
        if not await _restarting(core, crashes, count, crash, restart=restart, driver=driver):
            return
        # Let go of: its traceback holds the crashed turn's frames (its state, the model's
        # failure), which the restarted task would keep alive for as long as it runs.
        del crash


async def _restarting(
    core: AgentCore, crashes: _Crashes, count: int, error: Exception, *, restart: bool, driver: bool
) -> bool:
    """Wait the pause before a restart; whether the task starts again, announced on
    ``agent/restarted`` as it does.

    Announced past the pause, not before it: a driver whose agent is disposed
    meanwhile would only find it disposed and exit, so it is not restarted. A
    flusher is, for the final flush. With no pause the announcement comes first,
    before the checkpoint that lets the answered askers run.
    """
    # A given-up agent is disposed, which ends its pause at once.
    seconds = crashes.policy.pause(count) if restart else 0.0
    announced = restart and seconds <= 0
    if announced:
        core.emit("agent/restarted", error)
    await crashes.pause(core, seconds, driver=driver)
    if not restart or announced:
        return restart
    if driver and core.disposed:
        _dispose(core)
        return False
    core.emit("agent/restarted", error)
    return True


async def _pause(core: AgentCore, seconds: float, *, driver: bool) -> None:
    """Wait before a restart, so a crash loop cannot spin; disposal ends the wait.

    A driver's pause serves a cancel as it lands, as the driver would have at
    once (R7.4, R7.5): its askers are answered by the cancel itself, and its
    ``wait_idle`` callers must not wait for the pause to end.
    """
    if seconds > 0:
        log.warning("restarting a task of agent %s in %.3gs", core.id, seconds)
    with trio.move_on_after(seconds):
        while driver and not core.disposed:
            if core.cancel_marker:
                # Checked again before parking: a status listener may cancel anew.
                _serve_cancel_in_pause(core)
                continue
            if core.status == "running" and not core.mailbox.has_queued:
                # The prompts were withdrawn (their asker's turn cancelled): nothing
                # is left for the restarted driver but the steering sent meanwhile.
                _settle_in_pause(core)
                continue
            # A cancel drains the queued prompts and a withdrawal takes one, which wakes
            # this wait; a disposal wakes it too.
            await core.mailbox.wait_for_change(core.disposed_event)
        await core.disposed_event.wait()


def _serve_cancel_in_pause(core: AgentCore) -> None:
    """Serve a cancel that landed in a driver's restart pause, as the driver serves one
    before a turn starts (R7.4, R7.5): the agent is idle unless new work came after it."""
    core.spend_cancel()
    _settle_in_pause(core)


def _settle_in_pause(core: AgentCore) -> None:
    """Leave the agent idle in a restart pause unless it has work for the restarted driver."""
    # A steer made while the agent said "running" is new work (R3.10, R7.8).
    core.mailbox.requeue_steering()
    if core.mailbox.has_queued:
        return  # the restarted driver runs it
    if core.status == "running":
        core.set_status("idle")  # balances the crashed driver's "running"
    else:
        core.release_idle_waiters()


def _dispose(core: AgentCore) -> None:
    core.mark_disposed()
    core.discard_pending(TurnEndReason.disposed())


async def _recover_flusher(
    core: AgentCore, error: Exception, crashes: int, policy: RestartPolicy
) -> bool:
    """Report a flusher crash; whether to restart the flusher (else the agent is disposed).

    The driver runs on untouched: the flusher only flushes, and the flush that
    crashed is not retried (a failed flush is reported, never retried, R7.49).
    """
    interruption, core.flusher_interruption = core.flusher_interruption, None
    log.error("flusher of agent %s crashed", core.id, exc_info=error)
    core.emit("agent/error", core.session.last_turn, 0, error)
    _raise_interruption(interruption)
    restart = crashes <= policy.max_restarts and not core.disposed
    if not restart:
        # A disposed agent is not restarted: its driver is ending, or has ended.
        _dispose(core)
    await trio.lowlevel.checkpoint()
    return restart


async def _recover_driver(
    core: AgentCore, error: Exception, crashes: int, policy: RestartPolicy
) -> bool:
    """Close the crashed turn, then, once it is flushed as a turn's end is (R7.2, R7.49),
    answer its batch with what the log says and ready the agent for a fresh driver.

    Whether to restart the driver (else the agent is disposed).
    """
    batch, core.crashed_batch = core.crashed_batch, None
    unwinding, core.driver_interruption = core.driver_interruption, None
    if batch is not None and batch.interruption is not None:
        unwinding = batch.interruption
    try:
        _report_crash(core, error, batch)
        if crashes > policy.max_restarts:
            _dispose(core)
    finally:
        # Closed now, the turn is flushed by the flusher, on the way out too (R12.9);
        # whatever ends the recovery (an observer's Ctrl-C), its askers are answered
        # once it is, as a turn's own close answers them after its flush.
        try:
            await _crash_flushed(core)
        finally:
            # A session/flush listener's Ctrl-C out of the flush: the askers still hear.
            answer_crashed(core.session, batch, error)
    _raise_interruption(unwinding)
    if core.disposed:
        # Given up, or disposed meanwhile: a fresh driver would only find it disposed
        # and exit, and its agent/restarted would announce a driver that never runs.
        _dispose(core)
        return False
    _resume(core)
    return True


async def _crash_flushed(core: AgentCore) -> None:
    """Wait for the flush a crash asked for to end, fail, or lose its flusher (R7.49).

    Shielded and bounded by ``flush_timeout``, as a turn's own interrupted close
    waits for its flush: Ctrl-C or the runtime's cancel must not answer the
    askers of a turn the store does not have yet, nor take the place of what
    the recovery raises.
    """
    flushed = core.flush_rounds.waiter(requested=core.flush_owed)
    if flushed is None and core.flush_owed:
        # No flusher is left to run it (cancelled with the runtime before the crash):
        # flushed here, shielded and bounded, as the driver's own interrupted close is.
        core.flush_owed = False
        await flush_shielded(core, core.session.last_turn, 0)
        return
    with trio.CancelScope(shield=True) as scope:
        scope.relative_deadline = core.services.flush_timeout
        if flushed is None:
            await trio.lowlevel.checkpoint()
        else:
            # Past its bound a flusher runs it still: never a second flush beside it.
            await flushed.wait()


def _raise_interruption(interruption: BaseException | None) -> None:
    """Raise *interruption*, what the task was unwinding when it crashed, unless it is none
    or only a cancel.

    What the task records as it begins unwinding it: Ctrl-C, or a group holding
    it, which ends the runtime, as trio has it (any other ``BaseException`` of a
    model, an observer, a listener or a tool body is its failure, and ends
    nothing). Restarted in its place, the task would run on as if none had come. A cancel is not
    raised again: its scope is still cancelled, and the restarted task meets it.
    """
    if interruption is not None and not only_cancels(interruption):
        raise interruption


def _report_crash(core: AgentCore, error: Exception, batch: CrashedBatch | None) -> None:
    """Log the crash, close the turn it cut short, and report it on ``agent/error``."""
    log.error("driver of agent %s crashed", core.id, exc_info=error)
    reason = crash_reason(error, 0) if batch is None else batch.end_reason(error)
    interruption = _close_crashed_turn(core, reason)
    core.step_signal = None
    core.emit("agent/error", core.session.last_turn, reason.step, error)
    if interruption is not None:
        raise interruption


def _resume(core: AgentCore) -> None:
    """Ready the agent for a fresh driver, as a driver readies it after a turn's flush."""
    core.prefix = None
    core.header_anchored = False
    # A cancel of the crashed turn, or one landing while it was flushed, is spent (R7.8).
    core.spend_cancel()
    core.mailbox.requeue_steering()  # what the crashed turn left starts the next one (R3.10)
    if core.status == "running" and not core.mailbox.has_queued:
        core.set_status("idle")


def _seq_of(session: Session, event: Event) -> int:
    """Where a closer whose append raised landed: an observer's failure leaves it logged (R4.8)."""
    for logged in reversed(session.events):
        if logged.data is event.data:
            return logged.seq
    return event.seq


def _close_crashed_turn(core: AgentCore, reason: TurnEndReason) -> BaseException | None:
    """Log the closing events of the turn a crash left open, ending it for *reason*; what
    an observer raised that ends the runtime (Ctrl-C), once they are all logged."""
    session = core.session
    closers = closing_events(
        session.events,
        reason,
        error=ToolErrorInfo("InternalError", "INTERNAL"),
        text="Error: the agent's driver crashed before this tool call returned",
    )
    # The closers' seqs were reckoned ahead; an observer appending in between moves
    # them, so a source naming a closer is taken from where that closer landed.
    landed: dict[int, int] = {}
    interruption: BaseException | None = None
    for event in closers:
        ahead = event.source_event_seqs
        sources = None if ahead is None else [landed.get(seq, seq) for seq in ahead]
        try:
            landed[event.seq] = session.append(
                event.data, surface=event.surface_op, source_event_seqs=sources
            ).seq
        except BaseException as exc:
            landed[event.seq] = _seq_of(session, event)
            if isinstance(exc, Exception):
                log.exception("closing event observer failed for agent %s (contained)", core.id)
            elif interruption is None:
                # Ctrl-C from an observer goes on once the turn is closed, as it does
                # from one of a turn's own closing events (R7.44).
                interruption = exc
    # Made durable now, as a turn's end would be, not at the next turn's end: the
    # closing events, or a closed turn whose own flush the crash cut short.
    core.want_flush()
    return interruption
