"""The prompt-submit interception seam end to end, the decisions it takes, and what a
session-prefix listener may return (SPEC 6, R7.11-R7.37; T-I1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Accept, Allow, Block, Continue, HookContext, Message, MessageSource, Text
from retinue._request import MessageHistory
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import (
    DEADLINE,
    OPTIONS,
    Next,
    idle_events,
    last_end_reason,
    of_type,
    runtime,
    texts,
    turn_ends,
    types_without_chunks,
    user_texts,
)
from tests.scenarios._interception_kit import GUARD, request_texts

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
    (post-execute fields) ends the turn with an error naming the listener instead of being
    silently ignored."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(*_args: object) -> Block:
            return block

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        result = await agent.ask("HELLO")
        assert result.reason.kind == "error"
        assert str(result.reason.message).startswith(
            f"an agent/prompt-submit listener ({__name__}.{submit.__qualname__}) returned a "
            "Block with feedback"
        )
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
        logged = of_type(events, "turn/end")[0].data.reason  # type: ignore[union-attr]
        assert (logged.kind, logged.reason) == ("rejected", "no shouting")
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


async def test_prompt_submit_a_blocked_prompts_asker_gets_its_own_rejection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R7.11, R7.12: in a mixed batch each blocked prompt's ``ask`` ends ``rejected``
    with its own reason and no answer; the allowed prompt's ``ask`` gets the turn's answer."""
    model = ScriptedModel([Reply("it is noon")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(_agent: retinue.Agent, content: object, _source: object, _proceed: Next) -> Any:
            text = texts(content)  # type: ignore[arg-type]
            if "password" in text:
                return Block(f"secret: {text[:5]}") if "first" in text else Block()
            return Allow()

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        results: dict[str, retinue.TurnResult] = {}

        async def ask(prompt: str) -> None:
            results[prompt] = await agent.ask(prompt)

        prompts = ["first password", "what time is it?", "other password"]
        async with trio.open_nursery() as nursery:
            for prompt in prompts:  # all queued before the driver runs: one batch
                nursery.start_soon(ask, prompt)
        first, allowed, other = (results[prompt] for prompt in prompts)
        assert (first.turn, first.reason.kind, first.reason.reason, first.text) == (
            1,
            "rejected",
            "secret: first",
            "",
        )
        # A block without a reason ends the prompt with the fallback the log uses (R7.12).
        assert (other.turn, other.reason.reason, other.text) == (1, "prompt blocked by hook", "")
        assert (allowed.turn, allowed.reason.kind, allowed.text) == (1, "completed", "it is noon")
        assert turn_ends(agent.session.events) == ["completed"]
        check_session_invariants(agent.session.events)


async def test_prompt_submit_a_batch_all_blocked_logs_the_last_blocks_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I1 / R7.11, R7.12: a batch whose every prompt is blocked ends a turn logged
    ``rejected`` with the reason of the last block, while each ``ask`` ends with its own."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def submit(_agent: retinue.Agent, content: object, _source: object, _proceed: Next) -> Any:
            return Block(f"no {texts(content)}")  # type: ignore[arg-type]

        rt.hooks.on("agent/prompt-submit", submit, agent=agent)
        with trio.fail_after(DEADLINE):
            agent.send("shouting")  # queued with the ask's prompt before the driver runs
            whispering = await agent.ask("whispering")
            await agent.wait_idle()
        events = agent.session.events
        blocked = [event.data for event in of_type(events, "prompt/blocked")]
        assert [texts(data.content) for data in blocked] == ["shouting", "whispering"]  # type: ignore[union-attr]
        assert (whispering.reason.kind, whispering.reason.reason) == ("rejected", "no whispering")
        assert turn_ends(events) == ["rejected"]
        assert last_end_reason(events).reason == "no whispering"
        assert model.statistics().calls == 0
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
