"""The tool interception seams end to end, and a worked example plugin on every seam (SPEC 6,
R7.11-R7.37; T-I5..T-I7).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio
import trio.testing

import retinue
from retinue import Accept, Block, Deny, HookContext, ToolResultBlock
from retinue.session import Event
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import OPTIONS, Next, of_type, runtime, texts
from tests.scenarios._interception_kit import GUARD, note, prefix_message, request_texts

# -- T-I5 / T-I6 tool seams ---------------------------------------------------


async def test_post_execute_contexts_follow_all_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I5 / R9.18: post-execute contexts become context messages after every result, in model order."""
    calls = [ToolCallSpec("note", '{"text": "a"}'), ToolCallSpec("note", '{"text": "b"}')]
    model = ScriptedModel([CallTools(calls), Reply("done")])
    async with runtime(model, tools=[note]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def post(execution: object, _result: object, _proceed: Next) -> Accept:
            text = execution.arguments["text"]  # type: ignore[attr-defined]
            return Accept(additional_context=HookContext(f"about {text}", GUARD))

        rt.hooks.on("tools/post-execute", post, agent=agent)
        await agent.ask("go")
        events = agent.session.events
        step_one = [
            e.type for e in events if e.type in {"tool/result", "context/message", "step/end"}
        ]
        assert step_one[:5] == [
            "tool/result",
            "tool/result",
            "context/message",
            "context/message",
            "step/end",
        ]
        contexts = [texts(e.data.content) for e in of_type(events, "context/message")]  # type: ignore[union-attr]
        assert contexts == ["about a", "about b"]
        results = [texts(e.data.content) for e in of_type(events, "tool/result")]  # type: ignore[union-attr]
        assert results == ["noted a", "noted b"]
        check_session_invariants(events)


async def test_pre_execute_deny_is_an_error_result_the_model_sees(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I6 / R6.8, R9.3: a denied call never runs; the model sees ``Error: <reason>`` as its result."""
    ran: list[str] = []

    @retinue.tool
    async def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        await trio.lowlevel.checkpoint()
        ran.append(path)
        return "deleted"

    model = ScriptedModel(
        [CallTools([ToolCallSpec("delete", '{"path": "/etc"}', id="call-1")]), Reply("sorry")]
    )
    async with runtime(model, tools=[delete]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on(
            "tools/pre-execute",
            lambda _execution, _proceed: Deny("deleting is not allowed"),
            agent=agent,
        )
        result = await agent.ask("clean up")
        assert result.reason.kind == "completed"
        assert ran == []
        stored = of_type(agent.session.events, "tool/result")[0].data
        assert (stored.call_id, stored.is_error) == ("call-1", True)  # type: ignore[union-attr]
        assert texts(stored.content) == "Error: deleting is not allowed"  # type: ignore[union-attr]
        seen = model.requests[1].messages[-1].content[0]
        assert isinstance(seen, ToolResultBlock)
        assert (seen.tool_call_id, seen.is_error) == ("call-1", True)
        assert texts(seen.content) == "Error: deleting is not allowed"
        check_session_invariants(agent.session.events)


# -- T-I7 a worked example plugin on every seam ------------------------------


@attrs.define(eq=False)
class Guardrails:
    """An example plugin: blocks destructive prompts and tools, pins a prefix, logs every seam."""

    seen: list[str] = attrs.field(factory=list)

    def install(self, rt: retinue.Runtime) -> Callable[[], None]:
        """Register on every seam; return one function that removes everything."""
        seams: dict[str, Callable[..., object]] = {
            "agent/session-start": self.session_start,
            "agent/prompt-submit": self.prompt_submit,
            "agent/session-prefix": self.session_prefix,
            "agent/pre-step": self.pre_step,
            "agent/request": self.request,
            "agent/step-result": self.step_result,
            "agent/turn-continuation": self.continuation,
            "agent/turn-stop": self.turn_stop,
            "tools/pre-execute": self.pre_execute,
            "tools/post-execute": self.post_execute,
            "session/event": self.session_event,
        }
        removers = [rt.hooks.on(name, fn) for name, fn in seams.items()]  # type: ignore[call-overload]

        def uninstall() -> None:
            for remove in removers:
                remove()

        return uninstall

    def session_start(self, _agent: retinue.Agent, source: str) -> None:
        self.seen.append(f"session-start:{source}")

    async def prompt_submit(
        self, _agent: retinue.Agent, content: object, _source: object, proceed: Next
    ) -> object:
        self.seen.append("prompt-submit")
        if "rm -rf" in texts(content):  # type: ignore[arg-type]
            return Block("destructive command")
        return await proceed()

    async def session_prefix(
        self, _agent: retinue.Agent, _seed: object, _signal: object, proceed: Next
    ) -> object:
        self.seen.append("session-prefix")
        return [prefix_message("guardrails are on"), *await proceed()]  # type: ignore[misc]

    def pre_step(self, *_args: object) -> None:
        self.seen.append("pre-step")

    async def request(
        self, _agent: retinue.Agent, _turn: int, _step: int, config: object, proceed: Next
    ) -> object:
        self.seen.append("request")
        return attrs.evolve(await proceed(), temperature=0.0)  # type: ignore[misc]

    async def step_result(
        self, _agent: retinue.Agent, _turn: int, _step: int, message: object, proceed: Next
    ) -> object:
        self.seen.append("step-result")
        return await proceed()

    async def continuation(
        self, _agent: retinue.Agent, _turn: int, _default: object, proceed: Next
    ) -> object:
        self.seen.append("continuation")
        return await proceed()

    def turn_stop(self, _agent: retinue.Agent, _turn: int) -> None:
        self.seen.append("turn-stop")

    async def pre_execute(self, execution: object, proceed: Next) -> object:
        self.seen.append("pre-execute")
        if execution.name == "delete":  # type: ignore[attr-defined]
            return Deny("destructive tool")
        return await proceed()

    async def post_execute(self, _execution: object, _result: object, proceed: Next) -> object:
        self.seen.append("post-execute")
        return await proceed()

    def session_event(self, _session: object, event: Event) -> None:
        if event.type == "turn/end":
            self.seen.append("turn/end")


async def test_example_plugin_on_every_seam_and_its_removal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I7: one plugin on every seam blocks a destructive prompt; uninstalling it removes every listener."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("note", '{"text": "x"}')]), Reply("done"), Reply("unguarded")]
    )
    plugin = Guardrails()
    async with runtime(model, tools=[note]) as rt:
        uninstall = plugin.install(rt)
        agent = await rt.create_agent("a", OPTIONS)
        blocked = await agent.ask("please rm -rf /")
        assert (blocked.reason.kind, blocked.reason.reason) == ("rejected", "destructive command")
        assert model.statistics().calls == 0
        plugin.seen.clear()

        result = await agent.ask("take a note")
        assert result.reason.kind == "completed"
        assert set(plugin.seen) == {
            "prompt-submit",
            "session-prefix",
            "pre-step",
            "request",
            "step-result",
            "continuation",
            "turn-stop",
            "pre-execute",
            "post-execute",
            "turn/end",
        }
        assert all(request.config.temperature == 0.0 for request in model.requests)
        assert request_texts(model.requests[0].messages)[0] == "guardrails are on"

        uninstall()
        plugin.seen.clear()
        for name in (
            "agent/session-start",
            "agent/prompt-submit",
            "agent/session-prefix",
            "agent/pre-step",
            "agent/request",
            "agent/step-result",
            "agent/turn-continuation",
            "agent/turn-stop",
            "tools/pre-execute",
            "tools/post-execute",
            "session/event",
        ):
            assert not rt.hooks.has_listeners(name), name
        unguarded = await agent.ask("rm -rf / (this time for real)")
        assert unguarded.reason.kind == "completed"
        assert plugin.seen == []
        check_session_invariants(agent.session.events)
