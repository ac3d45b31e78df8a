"""User code that must type-check under ``mypy --strict`` as written (no test overrides).

Not a test module: mypy checks it with the rest of ``tests``, under a section of
its own that keeps every strict check on. A line marked ``type: ignore[...]`` is
code the checker must refuse: were it accepted, the ignore would be unused, which
this section reports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import retinue
from retinue import Accept, Allow, Deny, Text, ToolResultBlock
from retinue.hooks import PreToolDecision, SeamName
from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ContentBlock,
    Model,
    ModelRouter,
    RouteKey,
)
from retinue.session import JsonValue, ToolResultEvent
from retinue.stores import BufferedStore, MemoryStore
from retinue.testing import Reply, ScriptedModel
from retinue.tools import AgentHandle, ToolContext, ToolExecution, ToolExecutionResult


@retinue.tool
async def delegate(question: str, ctx: ToolContext) -> str:
    """Ask the calling agent's worker, then note the answer on the caller.

    Args:
        question: What to ask.
    """
    agent = ctx.agent
    assert agent is not None
    result = await agent.ask(question)
    agent.inject(f"the worker said: {result.text}")
    return f"{agent.id} is {agent.status} after turn {result.turn}"


@retinue.tool
def note(text: str, ctx: ToolContext) -> str:
    """Note *text* on the calling agent (from a worker thread).

    Args:
        text: What to note.
    """
    if ctx.agent is not None:
        ctx.agent.send(text)
        ctx.agent.cancel("noted")
    return text


def handle_of(agent: retinue.Agent) -> AgentHandle:
    return agent  # an Agent is the handle a tool sees


def routers(model: Model) -> list[ModelRouter]:
    prebuilt: dict[tuple[str, str], Model] = {("openai", "gpt-4.1"): model}
    keys: list[RouteKey] = ["gpt-4.1", ("anthropic", "claude")]
    return [
        ModelRouter.of({"gpt-4.1": model}),
        ModelRouter.of({("openai", "gpt-4.1"): model}),
        ModelRouter.of({"gpt-4.1": model, ("anthropic", "claude"): model}),
        ModelRouter.of(prebuilt),
        ModelRouter.of(dict.fromkeys(keys, model)),
        ModelRouter.of({1: model}),  # type: ignore[dict-item]
    ]


def admissions() -> list[AdmissionController]:
    limits = AdmissionLimits(max_concurrent=4)
    prebuilt: dict[tuple[str, str], AdmissionLimits] = {("openai", "gpt-4.1"): limits}
    return [
        AdmissionController(limits),
        AdmissionController(per_model={"gpt-4.1": limits, ("anthropic", "claude"): limits}),
        AdmissionController(per_model=prebuilt),
    ]


def tool_results(session: retinue.Session) -> list[str]:
    texts: list[str] = []
    for event in session.events:
        if isinstance(event.data, ToolResultEvent):
            texts.extend(block.text for block in event.data.content if isinstance(block, Text))
    return texts


def first_text(blocks: tuple[ContentBlock, ...], arguments: JsonValue) -> str | None:
    for block in blocks:
        if isinstance(block, Text | ToolResultBlock):
            return block.text if isinstance(block, Text) else str(arguments)
    return None


def stores() -> list[BufferedStore]:
    return [MemoryStore()]


async def scripted() -> ScriptedModel:
    return ScriptedModel([Reply("hi")])


def stop_options() -> list[retinue.AgentOptions]:
    return [
        retinue.AgentOptions(stop=["END"]),
        retinue.AgentOptions(stop=("END", "STOP")),
        retinue.AgentOptions(stop="END"),  # type: ignore[arg-type]
    ]


async def pre_execute(
    execution: ToolExecution, call_next: Callable[[], Awaitable[PreToolDecision]]
) -> PreToolDecision:
    return Deny("no") if execution.name == "rm" else await call_next()


def post_execute(
    execution: ToolExecution, result: ToolExecutionResult, call_next: object
) -> Accept:
    return Accept()


def on_status(agent: retinue.Agent, status: str) -> None:
    print(agent.id, status)


def listeners(rt: retinue.Runtime, rows: dict[str, str], names: list[SeamName]) -> None:
    rt.hooks.on("tools/pre-execute", pre_execute)
    rt.hooks.on("tools/post-execute", post_execute, agent="writer")
    rt.hooks.on("agent/status", on_status)
    rt.hooks.on("agent/created", lambda agent: print(agent.session.id))
    for row in rows:
        # A lambda keeping a loop variable as a default is checked too.
        rt.hooks.on("agent/status", lambda _a, status, row=row: rows.update({row: status}))
    for name in names:
        rt.hooks.on(name, lambda *_args: Allow())  # type: ignore[call-overload]
        rt.hooks.on(name, on_any)
    rt.hooks.on("tools/pre-execute", post_execute)  # type: ignore[call-overload]
    rt.hooks.on("tools/post-execute", pre_execute)  # type: ignore[call-overload]
    rt.hooks.on("agent/status", lambda _agent: None)  # type: ignore[call-overload]
    rt.hooks.on("agent/turn-stop", lambda _agent, _turn: Allow())  # type: ignore[call-overload]
    rt.hooks.on("agent/creatd", on_status)  # type: ignore[call-overload]
    rt.hooks.on("agent/status", on_status, agent=7)  # type: ignore[call-overload]


def on_any(*args: object) -> Any:
    return None
