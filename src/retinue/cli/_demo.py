"""``retinue demo``: many agents working concurrently, shown as a live table."""

from __future__ import annotations

import argparse
import errno
import logging
import random
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import trio

import retinue
from retinue._errors import is_interrupt, leaf_error

from ._demo_board import Board, DemoConsole, ReaderGoneError, show, summarize
from ._demo_hint import closing_hint, invoked_as
from ._demo_models import lookup_weather, open_model, write_note
from ._demo_options import DEFAULT_LATENCY, add_options, base_url_variable_problem, unused_option
from ._descriptors import make_room
from ._output import complain, printable
from ._passwords import without_passwords

__all__ = ["add_parser", "run_demo"]

log = logging.getLogger("retinue.cli")

CITIES = ("Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Perth", "Quito", "Tunis")


def add_parser(commands: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Register the ``demo`` sub-command, taking the options of *parents* too."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "demo",
        parents=list(parents),
        help="run many agents concurrently and show them working",
        description="Run many agents concurrently, their tools a weather lookup (run in "
        "parallel) and a shared notebook (exclusive), with a steer and a cancel along the way; "
        "show them in a live table, then a one-line summary. By default the agents talk to "
        "the embedded mock provider server and store their sessions in retinue.db (SQLite).",
    )
    add_options(parser)
    # Options that only make sense together are checked after parsing, with a usage error still.
    parser.set_defaults(handler=_run, usage_error=parser.error)


SOCKETS_PER_AGENT = {"mock": 2, "openai": 1, "anthropic": 1, "scripted": 0}
"""Sockets an agent's request holds: the embedded mock server's end is in this process too."""

FILES_PER_SESSION = 1
"""A SQLite or JSONL store keeps each live session's file (or lock file) open."""

DESCRIPTOR_MARGIN = 64
"""Open files besides the agents': standard streams, trio's wakeup socket, the listener,
the database and its journal. Measured, the mock provider with a file store uses about
3 per agent and about 20 more."""


def _run(args: argparse.Namespace) -> int:
    """Run the demo; a failure (a missing API key, an unreachable store) is one line, not a traceback."""
    unused = unused_option(args)
    if unused is not None:
        args.usage_error(unused)
    if args.latency is None:
        args.latency = DEFAULT_LATENCY
    problem = base_url_variable_problem(args)
    if problem is not None:
        complain(f"retinue demo: {problem}")
        return 1
    if sys.stdout is None:
        # Started with it closed (``>&-``), as the sessions commands refuse to: rich would
        # draw the table and the summary into nothing, and the status would say 0.
        closed = OSError(errno.EBADF, "cannot show the run: standard output is closed")
        complain(f"retinue demo: {closed}")
        return 1
    shortfall = _descriptor_shortfall(args)
    if shortfall is not None:
        complain(f"retinue demo: {shortfall}")
        return 1
    try:
        return int(trio.run(run_demo, args))
    except Exception as exc:
        if isinstance(leaf_error(exc), ReaderGoneError):
            return 1  # quietly, as the sessions commands do
        _log_failure(args.store, exc)  # shown with -v
        from ._sessions import store_problem

        complain(f"retinue demo: {store_problem(args.store, leaf_error(exc))}")
        return 1


def _log_failure(spec: str, error: Exception) -> None:
    """Log the traceback of the failure that ended the run, with the password of the
    PostgreSQL DSN *spec* may give hidden: libpq's message quotes a DSN it refuses."""
    if not log.isEnabledFor(logging.WARNING):
        return
    text = "".join(traceback.format_exception(error)).rstrip()
    kind, _, location = spec.partition(":")
    if kind == "postgres":
        text = without_passwords(text, location)
    log.warning("retinue demo failed\n%s", text)


def _descriptor_shortfall(args: argparse.Namespace) -> str | None:
    """Make room for the open files the demo needs; say why not when the limit is too low.

    Past the limit the embedded mock server cannot accept a connection and
    retries forever while every request waits for its timeout.
    """
    per_agent = SOCKETS_PER_AGENT[args.provider]
    if args.store.startswith(("sqlite:", "jsonl:")):
        per_agent += FILES_PER_SESSION
    needed = per_agent * args.agents + DESCRIPTOR_MARGIN
    limit = make_room(needed)
    if limit is None:
        return None
    fit = (limit - DESCRIPTOR_MARGIN) // per_agent if per_agent else 0
    fewer = f"use at most {fit} agents, or " if fit > 0 else ""
    return (
        f"--agents {args.agents} needs about {needed} open files, more than the {limit} "
        f"this process may open: {fewer}raise the limit to {needed} "
        "(ulimit -n; past the hard limit, ulimit -Hn as root)"
    )


def _store(spec: str) -> retinue.SessionStore:
    if spec == "memory":
        return retinue.MemoryStore()
    from ._sessions import open_store

    return open_store(spec)


async def _drive(agent: retinue.Agent, turns: int, rng: random.Random) -> None:
    for turn in range(turns):
        city = rng.choice(CITIES)
        await agent.ask(f"What's the weather in {city}? (request {turn + 1})")
    await trio.lowlevel.checkpoint()


async def run_demo(args: argparse.Namespace) -> int:
    """Run the demo and print a summary; returns the exit status.

    Interrupted (Ctrl-C), it still prints the summary of what ran, marked so, before
    the interrupt goes on: the live table's last frame shows the agents mid-turn.
    """
    board = Board()
    console = DemoConsole()
    agents: list[retinue.Agent] = []
    started = time.perf_counter()
    try:
        await _run_agents(args, board, console, agents, started)
    except BaseException as exc:
        if is_interrupt(exc):
            summarize(console, board, agents, time.perf_counter() - started, interrupted=True)
            _closing_hint(args, console)
        raise
    summarize(console, board, agents, time.perf_counter() - started)
    _closing_hint(args, console)
    return _status(board)


async def _run_agents(
    args: argparse.Namespace,
    board: Board,
    console: DemoConsole,
    agents: list[retinue.Agent],
    started: float,
) -> None:
    """Create the agents into *agents*, drive and disturb them, and wait until all are idle."""
    rng = random.Random(args.seed)
    async with (
        open_model(args) as (model, model_name),
        retinue.open_runtime(
            models=model,
            tools=[lookup_weather, write_note],
            store=_store(args.store),
            retry=retinue.RetryPolicy(),
        ) as rt,
    ):
        options = retinue.AgentOptions(model=model_name)
        for i in range(args.agents):
            # One by one: a Ctrl-C while they are made still counts those made.
            agents.append(await rt.create_agent(f"agent-{i:02d}", options))  # noqa: PERF401
        for agent in agents:
            rt.hooks.on("session/event", board.observe(agent), agent=agent)
            row = board.rows[agent.id]
            rt.hooks.on(
                "agent/status",
                lambda _a, status, row=row: setattr(row, "status", status),
                agent=agent,
            )
        finished = trio.Event()
        async with trio.open_nursery() as nursery:
            if not args.no_live:
                nursery.start_soon(show, board, console, started, finished)
            async with trio.open_nursery() as drivers:
                for agent in agents:
                    drivers.start_soon(_drive, agent, args.turns, random.Random(rng.random()))
                drivers.start_soon(_disturb, agents, args.turns, rng)
            for agent in agents:
                await agent.wait_idle()
            finished.set()


def _closing_hint(args: argparse.Namespace, console: DemoConsole) -> None:
    """Where the sessions were stored, and how to read them, unless kept in memory."""
    if args.store == "memory":
        return
    # The path is the user's, not markup or emoji codes.
    console.print(
        closing_hint(
            args.store,
            encoding=console.encoding,
            program=invoked_as(sys.argv[0], sys.executable, encoding=console.encoding),
        ),
        markup=False,
        emoji=False,  # ":notes" is a store name, not an emoji code
        highlight=False,
        soft_wrap=True,
    )


def _status(board: Board) -> int:
    """1 when no turn completed and some failed (a bad key or model): the demo did not run."""
    if board.first_error is None or board.ends["completed"]:
        return 0
    # A provider's text, its server's to choose: an escape sequence in it would drive the terminal.
    complain(f"retinue demo: no turn completed; the first error: {printable(board.first_error)}")
    return 1


async def _disturb(agents: list[retinue.Agent], turns: int, rng: random.Random) -> None:
    """Steer one agent and cancel another along the way.

    Not the only turn of the run: cancelled, it could not show that the model
    does not answer (a bad key, a wrong model) and the exit status would say 0.
    """
    await trio.sleep(0.02)
    target = rng.choice(agents)
    if target.status == "running":
        target.steer("Also mention whether to take an umbrella.")
    await trio.sleep(0.03)
    if len(agents) * turns > 1:
        rng.choice(agents).cancel("demo: cancelled by the operator")
