"""The step rules a session holds its log to (R4.13, R4.14, R4.16).

Steps open inside their turn, never overlap, are numbered 1, 2, ... in each
turn, and every event stamped with a step (its chunks, message, tool calls
and results) lies inside that step while it is open. A log that breaks one
would load as a history no run produced: the stamps would name steps that
never ran, or a turn would close around a step still open.
"""

from __future__ import annotations

from typing import NoReturn, Protocol, cast

from retinue._errors import SessionError

from ._events import (
    AssistantChunk,
    AssistantMessage,
    EventData,
    SteeringMessage,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = ["STEP_TYPES", "check_step"]


class _Stamped(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def step(self) -> int: ...


# Event data a session checks against its open step; only its own appends of
# these (a Replace keeps the stamps of what it rewrites, R4.20).
STEP_TYPES = frozenset(
    {
        StepStart,
        StepEnd,
        AssistantChunk,
        AssistantMessage,
        ToolCallEvent,
        ToolResultEvent,
        SteeringMessage,
    }
)


def check_step(data: EventData, turn: int | None, open_step: int | None, last_step: int) -> None:
    """Refuse *data* unless it keeps the step rules, given the log's open turn and step.

    *turn* is the open turn (``None`` between turns), *open_step* the step open
    in it (``None`` between steps) and *last_step* the last step it opened (0
    before its first).
    """
    if isinstance(data, StepStart):  # final classes: isinstance is the exact type
        _check_start(data, turn, open_step, last_step)
    elif isinstance(data, SteeringMessage):
        if data.turn != turn:
            raise SessionError(
                f"steering/message of turn {data.turn} {_inside(turn)}",
                code="TURN_MISMATCH",
            )
    else:
        stamped = cast("_Stamped", data)
        if open_step is None or stamped.turn != turn or stamped.step != open_step:
            _refuse_stamp(stamped, turn, open_step)


def _check_start(data: StepStart, turn: int | None, open_step: int | None, last_step: int) -> None:
    if data.turn != turn:
        raise SessionError(f"step/start of turn {data.turn} {_inside(turn)}", code="STEP_MISMATCH")
    if open_step is not None:
        raise SessionError(
            f"step/start {data.step} while step {open_step} is open", code="STEP_OVERLAP"
        )
    if data.step != last_step + 1:
        raise SessionError(
            f"step/start {data.step} does not follow step {last_step}: steps are numbered "
            f"1, 2, ... in each turn (the next is {last_step + 1})",
            code="STEP_NUMBER",
        )


def _refuse_stamp(data: _Stamped, turn: int | None, open_step: int | None) -> NoReturn:
    stamp = f"({data.turn}, {data.step})"
    where = "no step is open" if open_step is None else f"the open step is ({turn}, {open_step})"
    if type(data) is StepEnd:
        raise SessionError(f"step/end {stamp} does not close a step: {where}", code="STEP_MISMATCH")
    raise SessionError(f"{data.type} of step {stamp} while {where}", code="STEP_MISMATCH")


def _inside(turn: int | None) -> str:
    return "while no turn is open" if turn is None else f"inside turn {turn}"
