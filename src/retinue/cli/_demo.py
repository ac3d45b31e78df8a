"""``retinue demo``: many agents working concurrently, shown as a live table."""

from __future__ import annotations

import argparse
import errno
import itertools
import logging
import math
import random
import shlex
import string
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio
from rich.console import Console
from rich.live import Live
from rich.table import Table

import retinue
from retinue._errors import leaf_error
from retinue.providers._urls import base_url_from, url_problem
from retinue.session import Event, TurnEnd

from ._descriptors import make_room
from ._output import complain, discard_stdout, printable

if TYPE_CHECKING:
    from retinue.providers.anthropic import AnthropicModel
    from retinue.providers.openai import OpenAIModel

__all__ = ["add_parser", "run_demo"]

log = logging.getLogger("retinue.cli")

CITIES = ("Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Perth", "Quito", "Tunis")


def add_parser(commands: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Register the ``demo`` sub-command, taking the options of *parents* too."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "demo", parents=list(parents), help="run many agents concurrently and show them working"
    )
    parser.add_argument(
        "--agents", type=_at_least_one, default=20, help="how many agents (default 20)"
    )
    parser.add_argument(
        "--turns",
        type=_at_least_one,
        default=3,
        help=(
            "prompts per agent (default 3); the agent the demo steers may run one turn "
            "more, when the steering arrives after its turn's last step"
        ),
    )
    parser.add_argument(
        "--latency",
        type=_seconds,
        help=f"model latency in seconds (mock/scripted; default {DEFAULT_LATENCY})",
    )
    parser.add_argument("--seed", type=int, default=7, help="random seed")
    parser.add_argument(
        "--provider",
        choices=("mock", "scripted", "openai", "anthropic"),
        default="mock",
        help="mock: the real OpenAI adapter against the embedded mock server (default); "
        "scripted: an in-process ScriptedModel; openai/anthropic: the real service "
        "(needs OPENAI_API_KEY / ANTHROPIC_API_KEY)",
    )
    parser.add_argument("--model", type=_given, help="model name (openai/anthropic only)")
    parser.add_argument(
        "--base-url", type=_base_url, help="the service's base URL (openai/anthropic only)"
    )
    parser.add_argument(
        "--store",
        type=_store_spec,
        default="sqlite:retinue.db",
        help="sqlite:PATH | jsonl:DIR | postgres:DSN | memory (default sqlite:retinue.db)",
    )
    parser.add_argument(
        "--no-live",
        action="store_true",
        help=(
            "draw no live table; the summary is still printed, and after it, when the "
            "sessions are stored, the closing `retinue sessions list` hint"
        ),
    )
    # Options that only make sense together are checked after parsing, with a usage error still.
    parser.set_defaults(handler=_run, usage_error=parser.error)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _given(text: str) -> str:
    """Refuse an empty value (an unset ``"$VARIABLE"``): taken as not given, it would
    send the run to the default model or the real service."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r}")
    return text


def _base_url(text: str) -> str:
    """Refuse a base URL no request could be sent to (``localhost:8000/v1``) as the
    adapters do: the option is named by argparse, so the complaint is the problem alone."""
    problem = url_problem(_given(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}, got {text!r}")
    return text


def _seconds(text: str) -> float:
    """Check a duration when the command line is parsed: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


STORE_FORMS = "sqlite:PATH, jsonl:DIR, postgres:DSN or memory"
"""The ``--store`` values the demo takes, as its errors list them."""


def _store_spec(spec: str) -> str:
    """Check a ``--store`` value when the command line is parsed, not mid-run."""
    if spec.partition(":")[0] == "memory" and spec != "memory":
        raise argparse.ArgumentTypeError(f"invalid store {spec!r}: memory takes no location")
    if spec != "memory":
        from ._sessions import parse_store_spec

        try:
            parse_store_spec(spec, forms=STORE_FORMS)
        except retinue.ConfigError as exc:  # a path no file can have
            raise argparse.ArgumentTypeError(exc.message) from None
    return spec


SERVICE_PROVIDERS = ("openai", "anthropic")
"""The providers that take --model and --base-url: mock and scripted answer in this process."""

DEFAULT_LATENCY = 0.05
"""Seconds the mock and scripted models take before answering, unless --latency says."""


_USED_BY = {
    "model": SERVICE_PROVIDERS,
    "base_url": SERVICE_PROVIDERS,
    "latency": ("mock", "scripted"),
}
"""Options only some providers use, by their argparse destination."""

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
    unused = _unused_option(args)
    if unused is not None:
        args.usage_error(unused)
    if args.latency is None:
        args.latency = DEFAULT_LATENCY
    problem = _base_url_variable_problem(args)
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
        if isinstance(leaf_error(exc), _ReaderGoneError):
            return 1  # quietly, as the sessions commands do
        log.warning("retinue demo failed", exc_info=True)  # shown with -v
        from ._sessions import store_problem

        complain(f"retinue demo: {store_problem(args.store, leaf_error(exc))}")
        return 1


def _unused_option(args: argparse.Namespace) -> str | None:
    """The complaint about an option the chosen provider would silently ignore, if any."""
    for dest, providers in _USED_BY.items():
        if getattr(args, dest) is not None and args.provider not in providers:
            option = "--" + dest.replace("_", "-")
            uses = f"only --provider {' or '.join(providers)} uses it"
            return f"argument {option}: {uses}, not {args.provider}"
    return None


BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
"""Where a service's adapter takes its base URL from when --base-url is not given."""


def _base_url_variable_problem(args: argparse.Namespace) -> str | None:
    """The complaint about the base URL the environment gives the run, when it is no URL.

    The adapter would refuse it too, but only once the run has started, as
    a store's failure would be reported. Empty, it counts as unset.
    """
    variable = BASE_URL_VARIABLES.get(args.provider)
    if variable is None or args.base_url is not None:
        return None
    try:
        base_url_from(None, variable=variable)
    except ValueError as exc:
        return str(exc)
    return None


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
    return (
        f"--agents {args.agents} needs about {needed} open files, more than the {limit} "
        f"this process may open: use fewer agents or raise the limit (ulimit -n {needed})"
    )


class _ReaderGoneError(BrokenPipeError):
    """Standard output's reader went away (``| head``): the demo ends, as a failure."""


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """End the demo with :class:`_ReaderGoneError` when its reader goes away.

        rich raises SystemExit, which the nursery of the live table's task
        wraps in an exception group: a traceback instead of an exit.
        """
        self.quiet = True
        # Nothing more reaches the reader, and the interpreter's final flush must not fail.
        discard_stdout()
        raise _ReaderGoneError(errno.EPIPE, "standard output's reader went away")


@attrs.define
class _Row:
    status: str = "idle"
    turns: int = 0
    steps: int = 0
    tool_calls: int = 0
    last_end: str = "-"


@attrs.define
class _Board:
    rows: dict[str, _Row] = attrs.field(factory=dict)
    ends: Counter[str] = attrs.field(factory=Counter)
    first_error: str | None = None

    def observe(self, agent: retinue.Agent) -> Callable[[object, Event], None]:
        row = self.rows.setdefault(agent.id, _Row())

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
                agent_id.split("-session-")[0],
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


@retinue.tool(parallel_safe=True)
async def lookup_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    await trio.sleep(0.01)
    return f"{city}: {15 + len(city)}°C, light wind"


NOTES: list[str] = []


@retinue.tool
def write_note(text: str) -> str:
    """Append a line to the shared notebook (exclusive: it writes).

    Args:
        text: The line to write.
    """
    NOTES.append(text)
    return f"noted ({len(NOTES)} lines)"


def _scripted(latency: float) -> retinue.Model:
    from retinue.testing import ScriptedModel

    return ScriptedModel.tool_loop(
        ["lookup_weather", "lookup_weather", "write_note"],
        calls_per_step=3,
        answer_chunks=20,
        arguments={"lookup_weather": '{"city": "Lisbon"}', "write_note": '{"text": "checked"}'},
        delay=latency,
    )


@asynccontextmanager
async def _open_model(args: argparse.Namespace) -> AsyncIterator[tuple[retinue.Model, str]]:
    """Yield the model to drive and the model name agents ask for."""
    if args.provider == "scripted":
        yield _scripted(args.latency), "scripted"
        return
    if args.provider == "anthropic":
        from retinue.providers.anthropic import AnthropicModel

        async with AnthropicModel(base_url=args.base_url) as anthropic_model:
            _require_credentials(anthropic_model, ANTHROPIC_KEY_HINT)
            yield anthropic_model, args.model or "claude-haiku-4-5"
        return
    from retinue.providers.openai import OpenAIModel

    if args.provider == "openai":
        async with OpenAIModel(base_url=args.base_url) as openai_model:
            _require_credentials(openai_model, OPENAI_KEY_HINT)
            yield openai_model, args.model or "gpt-4.1-mini"
        return
    from retinue.providers.mock import EchoPolicy, Timing, open_mock_server

    timing = Timing(latency=args.latency)
    async with (
        open_mock_server(EchoPolicy(chunks=20, seed=args.seed), timing=timing) as server,
        OpenAIModel(base_url=server.openai_base_url, api_key="mock-key") as mock_model,
    ):
        yield mock_model, "mock-model"


ANTHROPIC_KEY_HINT = (
    "set the ANTHROPIC_API_KEY environment variable "
    "(or ANTHROPIC_AUTH_TOKEN, or choose a profile with ANTHROPIC_PROFILE)"
)
OPENAI_KEY_HINT = (
    "set the OPENAI_API_KEY environment variable (or --base-url for a server without keys)"
)


def _require_credentials(model: AnthropicModel | OpenAIModel, hint: str) -> None:
    """Refuse to start without credentials.

    Both adapters settle their credentials when built (Anthropic's client: a
    key or token, given or from the environment, a profile, workload identity
    federation) but refuse only per request, which would end every turn in the
    same error. The adapter reports what it found, so the SDK's rules are the
    only ones.
    """
    if not model.has_credentials:
        raise retinue.ConfigError(f"Missing credentials: {hint}")


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
    """Run the demo and print a summary; returns the exit status."""
    rng = random.Random(args.seed)
    board = _Board()
    console = _Console()
    started = time.perf_counter()
    async with (
        _open_model(args) as (model, model_name),
        retinue.open_runtime(
            models=model,
            tools=[lookup_weather, write_note],
            store=_store(args.store),
            retry=retinue.RetryPolicy(),
        ) as rt,
    ):
        options = retinue.AgentOptions(model=model_name)
        agents = [await rt.create_agent(f"agent-{i:02d}", options) for i in range(args.agents)]
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
                nursery.start_soon(_show, board, console, started, finished)
            async with trio.open_nursery() as drivers:
                for agent in agents:
                    drivers.start_soon(_drive, agent, args.turns, random.Random(rng.random()))
                drivers.start_soon(_disturb, agents, args.turns, rng)
            for agent in agents:
                await agent.wait_idle()
            finished.set()
        _summarize(console, board, agents, time.perf_counter() - started)
    if args.store != "memory":
        # The path is the user's, not markup or emoji codes; the command stays on one line to paste into a
        # shell, even piped, quoted when the path has spaces or glob characters, and given as
        # its bytes when it holds a control character or is no UTF-8.
        store = _without_password(args.store)
        command = f"retinue sessions list --store {_shell_word(store)}"
        console.print(
            f"sessions stored in {printable(store)}: try `{command}`",
            markup=False,
            emoji=False,  # ":notes" is a store name, not an emoji code
            highlight=False,
            soft_wrap=True,
        )
    return _status(board)


def _shell_word(text: str) -> str:
    """*text* quoted as one word for a POSIX shell, to paste on one line.

    Quoted as ``shlex.quote`` does, unless it holds a control character or
    a byte no text has (a file name's that is not UTF-8, which ``os.fsdecode``
    turned into a lone surrogate): neither can be pasted, so those are written
    in ANSI-C quoting as the bytes they are (``$'sessions-\\xff.db'``).
    """
    if not any(unicodedata.category(char) in _UNPASTABLE for char in text):
        return shlex.quote(text)
    parts = ["$'"]
    escaped = False  # a hex digit right after an escape would be read as part of it
    for char in text:
        if unicodedata.category(char) in _UNPASTABLE:
            parts.extend(f"\\x{byte:02x}" for byte in _bytes_of(char))
            escaped = True
            continue
        if escaped and char in string.hexdigits:
            parts.append("'$'")
        parts.append({"\\": "\\\\", "'": "\\'"}.get(char, char))
        escaped = False
    parts.append("'")
    return "".join(parts)


_UNPASTABLE = frozenset({"Cc", "Cs"})
"""Control characters, and surrogates: a terminal acts on the one, and cannot show the other."""


def _bytes_of(char: str) -> bytes:
    """The bytes *char* stands for in a file name (``os.fsencode``'s), else its UTF-8 bytes."""
    if 0xDC80 <= ord(char) <= 0xDCFF:  # a byte os.fsdecode could not decode
        return bytes([ord(char) - 0xDC00])
    return char.encode("utf-8", "surrogatepass")


def _without_password(spec: str) -> str:
    """*spec* with a PostgreSQL DSN's password hidden: the hint is printed, perhaps logged.

    A DSN that holds one is shown in ``key=value`` form with ``password=***``;
    the command then needs the password from elsewhere (``PGPASSWORD``, say).
    """
    kind, _, dsn = spec.partition(":")
    if kind != "postgres":
        return spec
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return "postgres:<DSN>"  # it connected, so this is not expected; never echo it
    if "password" not in params:
        return spec
    return "postgres:" + make_conninfo("", **{**params, "password": "***"})


def _status(board: _Board) -> int:
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


async def _show(board: _Board, console: Console, started: float, finished: trio.Event) -> None:
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


def _summarize(console: Console, board: _Board, agents: list[retinue.Agent], wall: float) -> None:
    turns = sum(row.turns for row in board.rows.values())
    steps = sum(row.steps for row in board.rows.values())
    calls = sum(row.tool_calls for row in board.rows.values())
    ends = ", ".join(f"{kind} {count}" for kind, count in sorted(board.ends.items()))
    events = sum(len(agent.session.events) for agent in agents)
    console.print()
    # One line, even piped (rich wraps at 80 columns then): the run's record, to grep.
    console.print(
        f"[bold]summary[/bold]: {len(agents)} agents, {turns} turns, {steps} steps, "
        f"{calls} tool calls, {events} events; end reasons: {ends}; wall time {wall:.2f}s",
        soft_wrap=True,
    )
