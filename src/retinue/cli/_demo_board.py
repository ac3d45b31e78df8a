"""The demo's live table: a row per agent, redrawn while they work, and the summary."""

from __future__ import annotations

import errno
import itertools
import shutil
import time
from collections import Counter
from collections.abc import Callable

import attrs
import trio
from rich.console import Console
from rich.live import Live
from rich.table import Table

import retinue
from retinue._fresh_ids import label_of
from retinue.session import Event, TurnEnd

from ._output import discard_stdout

__all__ = ["Board", "DemoConsole", "ReaderGoneError", "Row", "show", "summarize"]


class ReaderGoneError(BrokenPipeError):
    """Standard output's reader went away (``| head``): the demo ends, as a failure."""


class DemoConsole(Console):
    """rich's console on standard output, which ends the demo when its reader goes away."""

    def __init__(self) -> None:
        super().__init__()
        # COLUMNS=0 or LINES=0, as some containers set them for a process with no
        # terminal: rich takes them for no room at all, and would print nothing (the
        # summary included) or a live table of no rows. The terminal's size, else 80x24.
        if self.width < 1:
            self.width = shutil.get_terminal_size().columns
        if self.height < 1:
            self.height = shutil.get_terminal_size().lines

    def on_broken_pipe(self) -> None:
        """End the demo with :class:`ReaderGoneError` when its reader goes away.

        rich raises SystemExit, which the nursery of the live table's task
        wraps in an exception group: a traceback instead of an exit.
        """
        self.quiet = True
        # Nothing more reaches the reader, and the interpreter's final flush must not fail.
        discard_stdout()
        raise ReaderGoneError(errno.EPIPE, "standard output's reader went away")


@attrs.define
class Row:
    status: str = "idle"
    turns: int = 0
    steps: int = 0
    tool_calls: int = 0
    last_end: str = "-"


@attrs.define
class Board:
    rows: dict[str, Row] = attrs.field(factory=dict)
    ends: Counter[str] = attrs.field(factory=Counter)
    first_error: str | None = None

    def observe(self, agent: retinue.Agent) -> Callable[[object, Event], None]:
        row = self.rows.setdefault(agent.id, Row())

        def on_event(_session: object, event: Event) -> None:
            kind = event.type
            if kind == "step/start":
                row.steps += 1
            elif kind == "tool/call":
                row.tool_calls += 1
            elif isinstance(event.data, TurnEnd):
                reason = event.data.reason
                row.turns += 1
                row.last_end = reason.kind
                self.ends[row.last_end] += 1
                if reason.kind == "error" and self.first_error is None:
                    self.first_error = reason.message or reason.code or "error"

        return on_event

    def table(self, elapsed: float, height: int | None) -> Table:
        """The agents' rows, as many as fit in *height* lines (all: ``None``); one more
        row sums the rest.

        Rendering every row of thousands of agents ten times a second would cost
        more than running them.
        """
        table = Table(title=f"retinue demo: {len(self.rows)} agents, {elapsed:5.1f}s")
        for column in ("agent", "status", "turns", "steps", "tool calls", "last end"):
            table.add_column(column)
        # title, header, rules and the summary row
        room = len(self.rows) if height is None else max(height - 8, 1)
        shown = room if len(self.rows) <= room else room - 1
        for agent_id, row in itertools.islice(self.rows.items(), shown):
            table.add_row(
                label_of(agent_id) or agent_id,
                row.status,
                str(row.turns),
                str(row.steps),
                str(row.tool_calls),
                row.last_end,
            )
        if len(self.rows) > shown:
            table.add_row(*self._rest(shown))
        return table

    def _rest(self, shown: int) -> tuple[str, ...]:
        """The summary row of the agents after the first *shown*."""
        rest = list(itertools.islice(self.rows.values(), shown, None))
        statuses = Counter(row.status for row in rest)
        return (
            f"… {len(rest)} more",
            ", ".join(f"{status} {count}" for status, count in sorted(statuses.items())),
            str(sum(row.turns for row in rest)),
            str(sum(row.steps for row in rest)),
            str(sum(row.tool_calls for row in rest)),
            "",
        )


async def show(board: Board, console: Console, started: float, finished: trio.Event) -> None:
    """Redraw the table until every agent has finished, then draw it once more."""
    # Piped, the last table is the run's record: every row. On a terminal, what fits.
    height = console.height if console.is_terminal else None
    with Live(
        board.table(0.0, height), console=console, refresh_per_second=8, transient=False
    ) as live:
        while not finished.is_set():
            live.update(board.table(time.perf_counter() - started, height))
            with trio.move_on_after(0.1):
                await finished.wait()
        live.update(board.table(time.perf_counter() - started, height))
    await trio.lowlevel.checkpoint()


def summarize(
    console: Console,
    board: Board,
    agents: list[retinue.Agent],
    wall: float,
    *,
    interrupted: bool = False,
) -> None:
    turns = sum(row.turns for row in board.rows.values())
    steps = sum(row.steps for row in board.rows.values())
    calls = sum(row.tool_calls for row in board.rows.values())
    ends = ", ".join(f"{kind} {count}" for kind, count in sorted(board.ends.items()))
    events = sum(len(agent.session.events) for agent in agents)
    console.print()
    # One line, even piped (rich wraps at 80 columns then): the run's record, to grep.
    title = "summary (interrupted)" if interrupted else "summary"
    console.print(
        f"[bold]{title}[/bold]: {_counted(len(agents), 'agent')}, {_counted(turns, 'turn')}, "
        f"{_counted(steps, 'step')}, {_counted(calls, 'tool call')}, "
        f"{_counted(events, 'event')}; end reasons: {ends or 'none'}; wall time {wall:.2f}s",
        soft_wrap=True,
    )


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
