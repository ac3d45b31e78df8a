"""docs/hooks.md: its examples run as written, and its seam table matches ``SEAMS``.

The examples are copied here verbatim (listeners at module level, the body of
each ``main()`` inside its test); a test checks the copies still match the page.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import retinue
import retinue.hooks
from retinue import AgentOptions, Deny, MessageSource, Stop, Text, ToolResultBlock
from retinue.hooks import SEAMS
from retinue.prompt import Assembly, Section
from retinue.session import ContextMessage, Replace, StepStart, ToolResultEvent, TurnStart
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import DEADLINE

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"


def _section(title: str) -> str:
    """The text of the page's ``## title`` section, up to the next ``## `` heading."""
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _code_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


# -- the seam table --------------------------------------------------------------------------


def test_seam_table_lists_every_seam_with_its_mode() -> None:
    """The table under "Seams" names exactly the seams of ``SEAMS``, each with its mode."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in _section("Seams").splitlines()
        if line.startswith("| `")
    ]
    names = [row[0].strip("`") for row in rows]
    assert len(names) == len(set(names)), "a seam is listed twice"
    assert {row[0].strip("`"): row[1] for row in rows} == SEAMS
    assert names == list(SEAMS), "the table follows the order of SEAMS"


def test_every_mode_in_seams_has_a_paragraph() -> None:
    """Each dispatch mode a seam uses is described under "Dispatch modes"."""
    headings = set(re.findall(r"^### (\S+)$", _section("Dispatch modes"), flags=re.MULTILINE))
    assert set(SEAMS.values()) <= headings


# -- the examples match their copies below ----------------------------------------------------

_SKIPPED = ("import ", "from ", "async def main() -> None:", "trio.run(main)")


def _assert_tested(block: str) -> None:
    """Every line of *block* (imports and the ``main`` wrapper aside) is in this file, in order."""
    here = [line.strip() for line in Path(__file__).read_text().splitlines()]
    position = 0
    for line in (line.strip() for line in block.splitlines()):
        if not line or line.startswith(_SKIPPED):
            continue
        assert line in here[position:], f"example line not tested as written: {line!r}"
        position = here.index(line, position) + 1


def test_examples_on_the_page_are_the_ones_tested() -> None:
    """Each example's code is copied below as it is on the page."""
    blocks = _code_blocks(_section("Examples"))
    assert len(blocks) == 5
    for block in blocks:
        _assert_tested(block)


# -- example: add a section to the system prompt ----------------------------------------------


async def add_rules(agent, assembly: Assembly, call_next) -> Assembly:
    assembly = await call_next()
    rules = Section("rules", "Answer in one sentence.", order=10)
    return attrs.evolve(assembly, sections=(*assembly.sections, rules))


async def test_assemble_example_adds_a_section_to_the_request(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """The added section reaches the model request and the logged request header."""
    model = ScriptedModel([Reply("Hello.")])
    with trio.fail_after(DEADLINE):  # a hang fails in zero real time
        async with retinue.open_runtime(models=model, system_prompt="You are terse.") as rt:
            rt.hooks.on("system-prompt/assemble", add_rules)
            agent = await rt.create_agent("writer", AgentOptions(model="scripted"))
            await agent.ask("Say hello.")
    print(repr(model.requests[0].system))

    assert capsys.readouterr().out == "'You are terse.\\n\\nAnswer in one sentence.'\n"
    [request] = model.requests
    assert request.system == "You are terse.\n\nAnswer in one sentence."
    [header] = [e.data for e in agent.session.events if e.type == "request/header"]
    assert header.header.system == request.system
    [end] = [e.data for e in agent.session.events if e.type == "turn/end"]
    assert end.reason.kind == "completed"


# -- example: deny a tool ---------------------------------------------------------------------


@retinue.tool
async def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    return f"deleted {path}"


async def no_deletes(execution, call_next):
    if execution.name == "delete_file":
        return Deny("deleting files is not allowed")
    return await call_next()


async def test_pre_execute_example_denies_the_tool(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """The denied call never runs; its logged result and the model's next request carry the error."""
    model = ScriptedModel(
        [
            CallTools([ToolCallSpec("delete_file", '{"path": "notes.txt"}')]),
            Reply("I may not delete it."),
        ]
    )
    with trio.fail_after(DEADLINE):  # a hang fails in zero real time
        async with retinue.open_runtime(models=model, tools=[delete_file]) as rt:
            rt.hooks.on("tools/pre-execute", no_deletes)
            agent = await rt.create_agent("clerk", AgentOptions(model="scripted"))
            await agent.ask("Delete notes.txt.")
    # Narrowed by isinstance, which a type checker follows (the type tag it cannot).
    [result] = [e.data for e in agent.session.events if isinstance(e.data, ToolResultEvent)]
    [block] = result.content
    assert isinstance(block, Text)
    print(result.is_error, block.text)

    assert capsys.readouterr().out == "True Error: deleting files is not allowed\n"
    assert result.is_error
    assert result.content == (Text("Error: deleting files is not allowed"),)
    [sent] = model.requests[1].messages[-1].content
    assert isinstance(sent, ToolResultBlock)
    assert sent.is_error
    assert sent.content == (Text("Error: deleting files is not allowed"),)
    [end] = [e.data for e in agent.session.events if e.type == "turn/end"]
    assert end.reason.kind == "completed"


# -- example: watch an agent ------------------------------------------------------------------


async def test_emit_example_records_statuses_and_log_events(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scoped emit listeners hear each status change and every appended event, once."""
    statuses: list[str] = []
    seen: list[str] = []

    def on_status(agent, status):
        statuses.append(status)

    def on_event(session, event):
        seen.append(event.type)

    model = ScriptedModel([Reply("Hi!")])
    with trio.fail_after(DEADLINE):  # a hang fails in zero real time
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("greeter", AgentOptions(model="scripted"))
            unregister = rt.hooks.on("agent/status", on_status, agent=agent)
            rt.hooks.on("session/event", on_event, agent=agent)
            await agent.ask("Hello.")
            unregister()
    print(statuses)
    print(seen[0], seen[-1])

    assert capsys.readouterr().out == "['running', 'idle']\nturn/start turn/end\n"
    assert statuses == ["running", "idle"]
    assert seen == [event.type for event in agent.session.events]
    assert agent.status == "disposed"


# -- example: compact the history ------------------------------------------------------------


def history_seqs(events) -> list[int]:
    """The seqs of the events the history is built from, in order."""
    seqs: list[int] = []
    for event in events:
        if event.surface_op == "append":
            seqs.append(event.seq)
        elif isinstance(event.surface_op, Replace):
            start = seqs.index(event.surface_op.start)
            end = seqs.index(event.surface_op.end)
            seqs[start : end + 1] = [event.seq]
    return seqs


def compact(agent, turn, step, system_prompt, prefix, signal) -> None:
    """At a turn's first step, replace the turns before it with a summary."""
    if step != 1:
        return
    events = agent.session.events
    this_turn = next(e.seq for e in reversed(events) if isinstance(e.data, TurnStart))
    earlier = [seq for seq in history_seqs(events) if seq < this_turn]
    if len(earlier) < 4:
        return
    text = Text(f"(summary of {len(earlier)} earlier messages)")
    summary = ContextMessage((text,), source=MessageSource("plugin", "compactor"))
    agent.session.append(
        summary, surface=Replace(earlier[0], earlier[-1]), source_event_seqs=earlier
    )


async def test_pre_step_example_replaces_earlier_turns_with_a_summary(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """R7.19, R4.19: the summary replaces the first two turns in the third request; the log keeps them."""
    model = ScriptedModel([Reply("One."), Reply("Two."), Reply("Three.")])
    with trio.fail_after(DEADLINE):  # a hang fails in zero real time
        async with retinue.open_runtime(models=model) as rt:
            rt.hooks.on("agent/pre-step", compact)
            agent = await rt.create_agent("writer", AgentOptions(model="scripted"))
            for prompt in ("First.", "Second.", "Third."):
                await agent.ask(prompt)
    for message in model.requests[2].messages:
        text = "".join(block.text for block in message.content if isinstance(block, Text))
        print(message.role, text)

    assert capsys.readouterr().out == (
        'user <context source="plugin">(summary of 4 earlier messages)</context>\nuser Third.\n'
    )
    [replacing] = [e for e in agent.session.events if isinstance(e.surface_op, Replace)]
    assert replacing.source_event_seqs is not None
    replaced = [agent.session.events[seq] for seq in replacing.source_event_seqs]
    assert [e.type for e in replaced] == ["user/message", "assistant/message"] * 2
    assert [len(request.messages) for request in model.requests] == [1, 3, 2]


# -- example: cap the steps of a turn ---------------------------------------------------------

MAX_STEPS = 3


@retinue.tool
async def search(query: str) -> str:
    """Search the web.

    Args:
        query: What to look for.
    """
    return f"nothing found for {query}"


def cap_steps(agent, turn, decision, call_next):
    events = reversed(agent.session.events)
    step = next(event.data.step for event in events if isinstance(event.data, StepStart))
    if step >= MAX_STEPS:
        return Stop()
    return call_next()


async def test_turn_continuation_example_caps_the_steps_of_each_turn(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """R7.26: the continuation listener's Stop ends the turn completed after its third step."""
    model = ScriptedModel([CallTools([ToolCallSpec("search", '{"query": "retinue"}')])] * 5)
    with trio.fail_after(DEADLINE):  # a hang fails in zero real time
        async with retinue.open_runtime(models=model, tools=[search]) as rt:
            rt.hooks.on("agent/turn-continuation", cap_steps)
            agent = await rt.create_agent("researcher", AgentOptions(model="scripted"))
            result = await agent.ask("Find out about retinue.")
    print(result.reason.kind, len(model.requests), repr(result.text))

    assert capsys.readouterr().out == "completed 3 ''\n"
    steps = [e.data for e in agent.session.events if isinstance(e.data, StepStart)]
    assert [step.step for step in steps] == [1, 2, 3]
    results = [e.data for e in agent.session.events if isinstance(e.data, ToolResultEvent)]
    assert len(results) == 3


# -- the setup snippet ------------------------------------------------------------------------


async def test_setup_snippet_hears_session_start(autojump_clock: trio.testing.MockClock) -> None:
    """A listener registered in ``setup`` hears the agent's ``agent/session-start``."""
    [snippet] = _code_blocks(_section("Registering a listener"))[1:]
    heard: list[str] = []

    def on_start(agent, source):
        heard.append(source)

    options = AgentOptions(model="scripted")
    with trio.fail_after(DEADLINE):  # a hang fails in zero real time
        async with retinue.open_runtime(models=ScriptedModel([])) as rt:
            agent = await rt.create_agent(
                "writer",
                options,
                setup=lambda agent: rt.hooks.on("agent/session-start", on_start, agent=agent),
            )
            assert heard == ["startup"]
    assert agent.status == "disposed"
    _assert_tested(snippet)


# -- claims of the prose ----------------------------------------------------------------------


async def test_what_the_page_says_of_a_next_left_unawaited_holds() -> None:
    """R6.3: a listener leaving next() unawaited fails with HookError; awaited later, RuntimeError.

    The page says so, and not that such a late ``await`` raises ``HookError`` itself.
    """
    prose = " ".join(_section("Dispatch modes").split())
    assert "what it returned is closed: awaiting it later raises `RuntimeError`" in prose
    bus = retinue.hooks.HookBus()
    kept: list[Awaitable[object]] = []
    ran: list[str] = []

    async def keeps_next(config: object, call_next: Callable[[], Awaitable[object]]) -> str:
        kept.append(call_next())
        return "mine"

    async def inner(config: object, call_next: Callable[[], Awaitable[object]]) -> object:
        ran.append("inner")
        return await call_next()

    bus.on("agent/request", keeps_next)
    bus.on("agent/request", inner)
    with pytest.raises(retinue.hooks.HookError, match=r"never awaited what it returned"):
        await bus.waterfall_value("agent/request", "config", "config")
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        await kept[0]
    assert ran == []
