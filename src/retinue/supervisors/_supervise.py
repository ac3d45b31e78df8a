"""Driver supervision: a crashed driver (a bug) is reported and restarted on its log."""

from __future__ import annotations

import logging
from typing import final

import attrs
import trio

from retinue._errors import describe_error
from retinue.loop import AgentCore, run_flusher, run_loop
from retinue.session import ToolErrorInfo, TurnEndReason
from retinue.stores import closing_events

__all__ = ["RestartPolicy", "supervise"]

log = logging.getLogger("retinue.supervisors")


@final
@attrs.frozen
class RestartPolicy:
    """Restart a crashed driver, unless it crashed twice within ``window`` seconds."""

    window: float = 60.0
    max_restarts: int = 1


async def supervise(core: AgentCore, policy: RestartPolicy) -> None:
    """Run the agent's driver and its flusher; restart the driver after a crash.

    A turn failure never reaches here (the driver contains it); an exception
    that does is a bug. The open turn is closed ``error`` with code
    ``DRIVER_CRASH``, the crash reported on ``agent/error``, and a fresh driver
    instance resumes on the same log.
    """
    crashes: list[float] = []
    flusher_stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_flusher, core, flusher_stop)
            while True:
                try:
                    await run_loop(core)
                    break
                except Exception as exc:
                    try:
                        restart = _restart_after(core, exc, crashes, policy)
                    except Exception:
                        log.exception("recovering agent %s failed; disposing it", core.id)
                        core.mark_disposed()
                        core.discard_pending(TurnEndReason.disposed())
                        restart = False
                    if not restart:
                        break
            flusher_stop.set()
            core.flush_wanted.set()
    finally:
        # Only now: the agent is quiescent once its flusher, too, has finished (R12.9).
        core.driver_exited.set()


def _restart_after(
    core: AgentCore, error: Exception, crashes: list[float], policy: RestartPolicy
) -> bool:
    now = trio.current_time()
    crashes[:] = [t for t in crashes if now - t < policy.window]
    crashes.append(now)
    log.error("driver of agent %s crashed", core.id, exc_info=error)
    _close_crashed_turn(core, error)
    core.step_signal = None
    core.emit("agent/error", core.session.last_turn, 0, error)
    if len(crashes) > policy.max_restarts:
        core.mark_disposed()
        core.discard_pending(TurnEndReason.disposed())
        return False
    core.prefix = None
    core.header_anchored = False
    core.cancel_marker = False
    core.cancel_reason = None
    core.mailbox.requeue_steering()  # what the crashed turn left starts the next one (R3.10)
    if core.status == "running" and not core.mailbox.has_queued:
        core.set_status("idle")
    core.emit("agent/restarted", error)
    return True


def _close_crashed_turn(core: AgentCore, error: Exception) -> None:
    session = core.session
    reason = TurnEndReason.error(0, f"driver crashed: {describe_error(error)}", "DRIVER_CRASH")
    closers = closing_events(
        session.events,
        reason,
        error=ToolErrorInfo("InternalError", "INTERNAL"),
        text="Error: the agent's driver crashed before this tool call returned",
    )
    for event in closers:
        try:
            session.append(
                event.data, surface=event.surface_op, source_event_seqs=event.source_event_seqs
            )
        except Exception:
            log.exception("closing event observer failed for agent %s (contained)", core.id)
    if closers:
        # Made durable now, as a turn's end would be, not at the next turn's end.
        core.flush_wanted.set()
