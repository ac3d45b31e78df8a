"""Interception seams end to end (SPEC 6, R7.11-R7.37; T-I1..T-I7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import (
    Accept,
    Allow,
    Block,
    Continue,
    Deny,
    HookContext,
    Message,
    MessageSource,
    Stop,
    Text,
    ToolResultBlock,
)
from retinue._request import MessageHistory
from retinue.session import Event
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import (
    OPTIONS,
    Next,
    idle_events,
    of_type,
    runtime,
    texts,
    turn_ends,
    types_without_chunks,
    user_texts,
)

GUARD = MessageSource("plugin", "guard")


def request_texts(messages: Sequence[Message]) -> list[str]:
    """The text of every message of a request."""
    return [texts(message.content) for message in messages]


@retinue.tool(parallel_safe=True)
async def note(text: str) -> str:
    """Return a note after a while.

    Args:
        text: The note.
    """
    await trio.sleep(1)
    return f"noted {text}"


# -- T-I1 prompt-submit -------------------------------------------------------


async def test_prompt_submit_delegating_listener_allows_unchanged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R6.6: a listener that only delegates sees the prompt and its source; the default allows it."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[tuple[str, MessageSource]] = []

        async def submit(
            _agent: retinue.Agent, content: object, source: MessageSource, proceed: Next
        ) -> Any:
            seen.append((texts(content), source))  # type: ignore[arg-type]
            return await proceed()

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        result = await agent.ask("hello", source="cli")
        assert result.reason.kind == "completed"
        assert seen == [("hello", MessageSource("plugin", "cli"))]
        assert user_texts(agent.session.events) == ["hello"]
        assert request_texts(model.requests[0].messages) == ["hello"]


async def test_prompt_submit_rewrite_and_context_reach_history_and_pre_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R7.11: a rewrite replaces the prompt; additional context is a separate context message after it."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        at_pre_step: list[list[str]] = []

        def submit(
            _agent: retinue.Agent, _content: object, _source: object, _proceed: Next
        ) -> Allow:
            return Allow(
                content="rewritten prompt", additional_context=HookContext("house rules", GUARD)
            )

        def pre_step(agent: retinue.Agent, *_args: object) -> None:
            at_pre_step.append(request_texts(agent.session.derive_messages()))

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        await agent.ask("original prompt")
        events = agent.session.events
        assert types_without_chunks(events)[:3] == ["turn/start", "user/message", "context/message"]
        user = of_type(events, "user/message")[0].data
        assert (texts(user.content), user.source) == ("rewritten prompt", MessageSource())  # type: ignore[union-attr]
        context = of_type(events, "context/message")[0].data
        assert (texts(context.content), context.source) == ("house rules", GUARD)  # type: ignore[union-attr]
        rendered = ["rewritten prompt", '<context source="plugin">house rules</context>']
        assert at_pre_step == [rendered]
        assert request_texts(model.requests[0].messages) == rendered
        assert not any(
            "original prompt" in text for text in request_texts(model.requests[0].messages)
        )
        check_session_invariants(events)


@pytest.mark.parametrize(
    "block",
    [Block(feedback="tell the user why"), Block(additional_context=HookContext("see the log"))],
    ids=["feedback", "additional-context"],
)
async def test_prompt_submit_block_with_post_execute_fields_is_refused_not_dropped(
    autojump_clock: trio.testing.MockClock, block: Block
) -> None:
    """R6.6: a prompt's block carries only a reason; feedback or additional context on it
    (post-execute fields) ends the turn with an error naming the seam instead of being
    silently ignored."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(*_args: object) -> Block:
            return block

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        result = await agent.ask("HELLO")
        assert result.reason.kind == "error"
        assert "agent/prompt-submit returned a Block with feedback" in str(result.reason.message)
        assert model.statistics().calls == 0
        check_session_invariants(agent.session.events)


async def test_prompt_submit_block_only_is_a_rejected_zero_step_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R7.12: every prompt blocked: ``prompt/blocked`` with the original, turn ``rejected``, no model call."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(
            _agent: retinue.Agent, _content: object, _source: object, _proceed: Next
        ) -> Block:
            return Block("no shouting")

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        result = await agent.ask("HELLO")
        events = agent.session.events
        assert (result.reason.kind, result.reason.reason) == ("rejected", "no shouting")
        assert types_without_chunks(events) == ["turn/start", "prompt/blocked", "turn/end"]
        blocked = of_type(events, "prompt/blocked")[0].data
        assert (texts(blocked.content), blocked.source, blocked.reason) == (
            "HELLO",
            MessageSource(),
            "no shouting",
        )  # type: ignore[union-attr]
        assert agent.session.derive_messages() == []
        assert model.statistics().calls == 0
        check_session_invariants(events)


async def test_prompt_submit_mixed_batch_runs_the_allowed_prompts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R7.12: a batch with a blocked and an allowed prompt runs; only the block is recorded as such."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(_agent: retinue.Agent, content: object, _source: object, _proceed: Next) -> Any:
            return Block("secret") if "password" in texts(content) else Allow()  # type: ignore[arg-type]

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        agent.send("my password is hunter2")
        agent.send("what time is it?")
        events = await idle_events(agent)
        assert types_without_chunks(events)[:3] == ["turn/start", "prompt/blocked", "user/message"]
        assert turn_ends(events) == ["completed"]
        assert request_texts(model.requests[0].messages) == ["what time is it?"]
        check_session_invariants(events)


async def test_prompt_submit_raising_listener_ends_the_turn_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R6.2, R7.47: a raising prompt-submit listener ends a balanced ``error`` turn; the driver survives."""
    model = ScriptedModel([Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[tuple[int, int, str]] = []
        failures = [RuntimeError("policy service down")]

        async def submit(
            _agent: retinue.Agent, _content: object, _source: object, proceed: Next
        ) -> Any:
            if failures:
                raise failures.pop()
            return await proceed()

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        rt.hooks.on(
            "agent/error",
            lambda _a, turn, step, err: errors.append((turn, step, str(err))),
            agent=agent,
        )
        result = await agent.ask("hi")
        assert (result.reason.kind, result.reason.step, result.reason.message) == (
            "error",
            0,
            "policy service down",
        )
        assert errors == [(1, 0, "policy service down")]
        assert of_type(agent.session.events, "step/start") == []
        assert model.statistics().calls == 0
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_prompt_submit_non_decision_ends_the_turn_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R6.6: a listener returning something that is not a decision fails the turn closed."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/prompt-submit", lambda *_args: None, agent=agent)  # type: ignore[call-overload]
        result = await agent.ask("hi")
        assert result.reason.kind == "error"
        assert of_type(agent.session.events, "user/message") == []
        assert model.statistics().calls == 0
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Continue("keep going"),  # type: ignore[arg-type]
        lambda: Allow(additional_context="note"),  # type: ignore[arg-type]
        lambda: Accept(additional_context="note"),  # type: ignore[arg-type]
        lambda: Block("no", additional_context="note"),  # type: ignore[arg-type]
    ],
)
def test_decision_context_must_be_a_hook_context(build: Callable[[], object]) -> None:
    """R6.3: a decision's context is a HookContext; anything else is refused where it is built."""
    with pytest.raises(TypeError, match="HookContext"):
        build()


async def test_session_prefix_listener_returning_none_ends_the_turn_invalid(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.18, R6.3: a session-prefix listener that returns nothing fails the turn with
    ``INVALID_HOOK_RESULT``, not an untyped error.
    """
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def forgot_to_return(
            _agent: object, _seed: object, _signal: object, call_next: Next
        ) -> None:
            await call_next()

        rt.hooks.on("agent/session-prefix", forgot_to_return, agent=agent)  # type: ignore[call-overload]
        result = await agent.ask("hi")
        assert result.reason.kind == "error"
        assert result.reason.code == "INVALID_HOOK_RESULT"
        assert model.statistics().calls == 0


async def test_session_prefix_listener_may_return_another_sessions_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.18: any sequence of messages is a prefix, such as a ``derive_messages()`` result."""
    history = MessageHistory((Message("user", (Text("context"),)),))
    model = ScriptedModel([Reply("hi")])
    async with runtime(model) as rt:

        async def prefix(_agent: object, _seed: object, _signal: object, call_next: Next) -> Any:
            await call_next()
            return history

        rt.hooks.on("agent/session-prefix", prefix)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hello")
        assert result.reason.kind == "completed"
        assert model.requests[0].messages[0] == Message("user", (Text("context"),))


# -- T-I2 session-start -------------------------------------------------------


async def test_session_start_fires_once_and_can_seed_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I2 / R6.10, R7.3: session-start fires once with ``startup``; its inject is seen by the first request."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        starts: list[tuple[str, str, int]] = []

        def on_start(agent: retinue.Agent, source: str) -> None:
            starts.append((agent.id, source, len(agent.session.events)))
            agent.inject("you are in a test", source="seed")

        rt.hooks.on("agent/session-start", on_start)
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        await agent.ask("second")
        assert starts == [(agent.id, "startup", 0)]
        first = request_texts(model.requests[0].messages)
        assert first == ['<context source="plugin">you are in a test</context>', "first"]
        starts_of_turns = of_type(agent.session.events, "turn/start")
        assert [e.data.trigger.kind for e in starts_of_turns] == ["injection", "message", "message"]  # type: ignore[union-attr]
        check_session_invariants(agent.session.events)


async def test_session_start_raising_listener_does_not_abort_creation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I2 / R6.2 table: a raising session-start listener is contained; the agent is created and works."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        heard: list[str] = []

        def raising(_agent: retinue.Agent, _source: str) -> None:
            raise RuntimeError("plugin crashed")

        rt.hooks.on("agent/session-start", raising)
        rt.hooks.on("agent/session-start", lambda _agent, source: heard.append(source))
        agent = await rt.create_agent("a", OPTIONS)
        assert rt.agents.get(agent.id) is agent
        assert heard == ["startup"]
        assert (await agent.ask("hi")).reason.kind == "completed"


# -- T-I3 session-prefix ------------------------------------------------------


def prefix_message(text: str) -> Message:
    return Message("user", (Text(text),))


async def test_session_prefix_composed_once_fronts_every_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R7.18, R8.6: composed once per driver, in front of every request, recorded in the header only."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("note", '{"text": "x"}')]), Reply("one"), Reply("two")]
    )
    async with runtime(model, tools=[note]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls: list[str] = []
        pre_step_prefixes: list[tuple[Message, ...]] = []

        async def prefix(
            _agent: retinue.Agent, seed: object, _signal: object, proceed: Next
        ) -> Any:
            calls.append("prefix")
            assert seed == ()
            with pytest.raises(AttributeError):
                seed.append(prefix_message("into the seed"))  # type: ignore[attr-defined]
            return [prefix_message("project facts"), *await proceed()]  # type: ignore[misc]

        def pre_step(
            _agent: retinue.Agent,
            _turn: int,
            _step: int,
            _system: str,
            prefix: object,
            _sig: object,
        ) -> None:
            calls.append("pre-step")
            pre_step_prefixes.append(tuple(prefix))  # type: ignore[call-overload,arg-type]

        rt.hooks.on("agent/session-prefix", prefix, agent=agent)
        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        await agent.ask("first")
        await agent.ask("second")
        assert calls == ["prefix", "pre-step", "pre-step", "pre-step"]
        assert pre_step_prefixes == [(prefix_message("project facts"),)] * 3
        assert len(model.requests) == 3
        for request in model.requests:
            assert request.messages[0] == prefix_message("project facts")
        assert all(
            "project facts" not in text for text in request_texts(agent.session.derive_messages())
        )
        headers = of_type(agent.session.events, "request/header")
        assert len(headers) == 1
        assert headers[0].data.header.message_prefix == (prefix_message("project facts"),)  # type: ignore[union-attr]
        assert of_type(agent.session.events, "request/header-delta") == []
        check_session_invariants(agent.session.events)


async def test_session_prefix_prepend_idiom_keeps_registration_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R8.7: ``[mine, *await next()]`` puts the first-registered listener's message first."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def contributor(text: str) -> Callable[..., Awaitable[object]]:
            async def prefix(
                _agent: retinue.Agent, _seed: object, _signal: object, proceed: Next
            ) -> object:
                return [prefix_message(text), *await proceed()]  # type: ignore[misc]

            return prefix

        for text in ("first plugin", "second plugin", "third plugin"):
            rt.hooks.on("agent/session-prefix", contributor(text), agent=agent)  # type: ignore[call-overload]
        await agent.ask("hi")
        assert request_texts(model.requests[0].messages) == [
            "first plugin",
            "second plugin",
            "third plugin",
            "hi",
        ]


async def test_session_prefix_absent_is_omitted_from_the_header(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R8.2: with no prefix listener the header has no prefix, in memory and in the dumped JSON."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
        header = of_type(agent.session.events, "request/header")[0].data.header  # type: ignore[union-attr]
        assert header.message_prefix == ()
        assert request_texts(model.requests[0].messages) == ["hi"]
        dumped = next(d for d in agent.session.dump() if d["type"] == "request/header")
        assert "message_prefix" not in dumped["data"]["header"]  # type: ignore[index]


async def test_session_prefix_cache_is_immune_to_listener_held_mutation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R7.18: the cached prefix is a copy; mutating the list a listener returned changes nothing."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        held: list[Message] = []

        def prefix(
            _agent: retinue.Agent, _seed: object, _signal: object, _proceed: Next
        ) -> list[Message]:
            held.append(prefix_message("original"))
            return held

        rt.hooks.on("agent/session-prefix", prefix, agent=agent)
        await agent.ask("first")
        held.append(prefix_message("smuggled"))
        held[0] = prefix_message("tampered")
        await agent.ask("second")
        assert request_texts(model.requests[1].messages)[:1] == ["original"]
        assert "smuggled" not in request_texts(model.requests[1].messages)
        assert of_type(agent.session.events, "request/header-delta") == []


# -- T-I4 continuation --------------------------------------------------------


async def test_continuation_reason_becomes_steering_of_the_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I4 / R7.27: ``Continue(reason)`` runs another step in the same turn with the reason as steering."""
    model = ScriptedModel([Reply("draft"), Reply("final")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        decisions: list[object] = []

        async def continuation(
            _agent: retinue.Agent, turn: int, default: object, proceed: Next
        ) -> Any:
            decisions.append(default)
            if len(decisions) == 1:
                return Continue(HookContext("check your work", MessageSource("plugin", "critic")))
            return await proceed()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        result = await agent.ask("write")
        events = agent.session.events
        assert decisions == [Stop(), Stop()]
        assert (result.reason.kind, result.text) == ("completed", "final")
        assert len(of_type(events, "turn/start")) == 1
        assert len(of_type(events, "step/start")) == 2
        steering = of_type(events, "steering/message")[0]
        assert steering.data.turn == 1  # type: ignore[union-attr]
        assert steering.data.source == MessageSource("plugin", "critic")  # type: ignore[union-attr]
        step_starts = [e.seq for e in of_type(events, "step/start")]
        assert step_starts[0] < steering.seq < step_starts[1]
        assert request_texts(model.requests[1].messages) == [
            "write",
            "draft",
            '<steering source="plugin">check your work</steering>',
        ]
        check_session_invariants(events)


async def test_continuation_stop_wins_over_tool_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I4 / R7.26: ``Stop`` ends the turn even though the step had tool calls (their results stay)."""
    model = ScriptedModel([CallTools([ToolCallSpec("note", '{"text": "x"}')]), Reply("unused")])
    async with runtime(model, tools=[note]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        defaults: list[object] = []

        def continuation(
            _agent: retinue.Agent, _turn: int, default: object, _proceed: Next
        ) -> Stop:
            defaults.append(default)
            return Stop()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert defaults == [Continue()]
        assert result.reason.kind == "completed"
        assert len(of_type(events, "step/start")) == 1
        assert len(of_type(events, "tool/result")) == 1
        assert model.statistics().calls == 1
        check_session_invariants(events)


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
