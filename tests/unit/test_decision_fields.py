"""Decisions check their text fields when built (SPEC 6.3, R6.6, R6.8; docs/hooks.md Decisions)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

import retinue
from retinue import Accept, Allow, Ask, Block, Continue, Deny, HookContext, Text
from retinue._content import ContentBlock, OpaqueBlock
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, of_type, runtime, texts


@retinue.tool
async def remove(path: str) -> str:
    """Remove a file.

    Args:
        path: The file.
    """
    await trio.lowlevel.checkpoint()
    return f"removed {path}"


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (lambda: Deny(None), "Deny.reason must be a str, got None"),  # type: ignore[arg-type]
        (lambda: Deny(b"no"), "Deny.reason must be a str"),  # type: ignore[arg-type]
        (lambda: Block(None), "Block.reason must be a str, got None"),  # type: ignore[arg-type]
        (lambda: Block(reason=3), "Block.reason must be a str"),  # type: ignore[arg-type]
        (lambda: Ask(3), "Ask.reason must be a str or None"),  # type: ignore[arg-type]
    ],
    ids=["Deny None", "Deny bytes", "Block None", "Block int", "Ask int"],
)
def test_a_reason_of_another_type_is_refused_when_built(
    build: Callable[[], object], problem: str
) -> None:
    """R6.6, R6.8: a reason is text the model or the log is shown; another type is a
    ``TypeError`` at the listener's own line, not ``Error: None`` for the model."""
    with pytest.raises(TypeError, match=problem):
        build()


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (
            lambda: Continue("keep going"),  # type: ignore[arg-type]
            (
                "Continue.reason must be a retinue.HookContext or None, got str"
                ' (wrap text as retinue.HookContext("..."))'
            ),
        ),
        (
            lambda: Allow(additional_context="be brief"),  # type: ignore[arg-type]
            (
                "Allow.additional_context must be a retinue.HookContext or None, got str"
                ' (wrap text as retinue.HookContext("..."))'
            ),
        ),
        (
            lambda: Accept(additional_context="checked"),  # type: ignore[arg-type]
            (
                "Accept.additional_context must be a retinue.HookContext or None, got str"
                ' (wrap text as retinue.HookContext("..."))'
            ),
        ),
        (
            lambda: Block(additional_context=[Text("see the log")]),  # type: ignore[arg-type]
            (
                "Block.additional_context must be a retinue.HookContext or None, got list"
                " (wrap content blocks as retinue.HookContext(...))"
            ),
        ),
        (
            lambda: Continue(3),  # type: ignore[arg-type]
            "Continue.reason must be a retinue.HookContext or None, got int",
        ),
    ],
    ids=["Continue str", "Allow str", "Accept str", "Block list", "Continue int"],
)
def test_a_context_of_another_type_is_refused_naming_the_field_and_how_to_wrap_it(
    build: Callable[[], object], problem: str
) -> None:
    """R1.4, docs/hooks.md Decisions: a context field takes a ``HookContext``; bare text or
    blocks are a ``TypeError`` naming the field and the public class that wraps them."""
    with pytest.raises(TypeError) as refused:
        build()
    assert str(refused.value) == problem


_BLANK = pytest.mark.parametrize(
    "content",
    [(), "", " \n", [Text(""), Text("\u3000")]],
    ids=["no block", "empty text", "blank text", "blank blocks"],
)


@pytest.mark.parametrize(
    "build",
    [
        lambda context: Allow(additional_context=context),
        lambda context: Accept(additional_context=context),
        lambda context: Block(reason="no", additional_context=context),
    ],
    ids=["Allow", "Accept", "Block"],
)
@_BLANK
def test_a_blank_additional_context_is_none(
    build: Callable[[HookContext], Allow | Accept | Block], content: str | tuple[()] | list[Text]
) -> None:
    """R1.4: a context is content the model is also shown; one with nothing in it but
    whitespace would show it an empty ``<context>`` block, so it is taken as none, as a
    blank ``Block`` reason is: a lookup that found nothing is no error."""
    assert build(HookContext(content)).additional_context is None


@_BLANK
def test_a_blank_continue_reason_is_refused_when_built(
    content: str | tuple[()] | list[Text],
) -> None:
    """R7.26, R7.27: a blank ``Continue`` reason is refused at the listener's own line: taken as
    none, it would run another step with nothing new, the model answering its own reply step after
    step; ``None`` continues without steering."""
    with pytest.raises(ValueError, match=r"must not be a blank HookContext: leave it None"):
        Continue(HookContext(content))


def test_a_context_of_content_that_is_not_text_is_not_blank() -> None:
    """R1.4: only text is blank: a block of another kind is something to show."""
    image = OpaqueBlock("image", {"url": "https://example.com/a.png"})
    assert Continue(HookContext([Text(" "), image])).reason == HookContext([Text(" "), image])


@pytest.mark.parametrize("reason", ["", "   ", "\n\t", "\u3000"])
def test_an_empty_or_blank_deny_reason_is_refused_when_built(reason: str) -> None:
    """R6.8: a denial's reason is all the model is told, so an empty one is refused, as
    post-execute refuses a ``Block`` with neither feedback nor a reason; one of only
    whitespace tells the model as little."""
    with pytest.raises(ValueError, match=r"Deny\.reason must not be empty or blank"):
        Deny(reason)


def test_a_blank_ask_reason_is_refused_when_built() -> None:
    """R6.8: an ``Ask`` reason is always shown, as ``Error: <reason>``: one of only
    whitespace would say nothing, so it is refused; ``None`` gives none (the tool's name
    stands in)."""
    with pytest.raises(ValueError, match=r"Ask\.reason must not be blank: leave it None"):
        Ask(" \t ")


@pytest.mark.parametrize("reason", ["  ", "\n", "\u3000"])
def test_a_blank_block_reason_is_taken_as_none(reason: str) -> None:
    """R6.6, R6.9: a ``Block`` reason is not always shown (feedback stands in for it, and a blocked
    prompt has a fallback), so one of only whitespace is taken as the empty one, not refused when
    built, which would end a blocked prompt's turn in an error."""
    assert Block(reason).reason == ""
    assert Block(reason=reason, feedback=[Text("use the sandbox")]).reason == ""


@pytest.mark.parametrize("feedback", ["", " \n", [Text("")], [Text(" "), Text("\u3000")], []])
def test_blank_block_feedback_is_taken_as_none(feedback: str | list[ContentBlock]) -> None:
    """R6.9: feedback holding nothing but text of only whitespace would be shown as an
    error saying nothing, so it is none, as a blank reason is the empty one."""
    assert Block(feedback=feedback).feedback is None
    assert Block("no", feedback=feedback).feedback is None


def test_block_feedback_of_content_that_is_not_text_is_not_blank() -> None:
    """R6.9: only text is blank: an image beside blank text is feedback to show."""
    image = OpaqueBlock("image", {"url": "https://example.com/a.png"})
    assert Block(feedback=[Text(" "), image]).feedback == (Text(" "), image)


@pytest.mark.parametrize(
    ("decision", "arguments", "reason"),
    [
        (Block, (), ""),
        (Block, ("",), ""),
        (Ask, (), None),
        (Ask, ("",), ""),
        (Deny, (" no ",), " no "),
    ],
    ids=["Block()", "Block('')", "Ask()", "Ask('')", "Deny(' no ')"],
)
def test_the_documented_defaults_are_still_built(
    decision: Callable[..., Block | Ask | Deny], arguments: tuple[str, ...], reason: str | None
) -> None:
    """docs/hooks.md: ``Block`` defaults to an empty reason (a prompt may be blocked without
    one); ``Ask`` to none (the denial names the tool)."""
    assert decision(*arguments).reason == reason


async def _denied_with(reason: object) -> str:
    """What the model is shown for a call a pre-execute listener denies with *reason*."""
    model = ScriptedModel([CallTools([ToolCallSpec("remove", '{"path": "x"}')]), Reply("ok")])
    async with runtime(model, tools=[remove]) as rt:
        rt.hooks.on("tools/pre-execute", lambda _execution, _next: Deny(reason))  # type: ignore[arg-type,call-overload]
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    assert result.reason.kind == "completed"
    (event,) = of_type(agent.session.events, "tool/result")
    assert event.data.is_error  # type: ignore[union-attr]
    return texts(event.data.content)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("deleting files is not allowed", "Error: deleting files is not allowed"),
        (None, "Error: Deny.reason must be a str, got None"),
        ("", "Error: Deny.reason must not be empty"),
        ("  ", "Error: Deny.reason must not be empty or blank"),
    ],
)
async def test_the_model_is_shown_why_a_call_was_refused(
    autojump_clock: trio.testing.MockClock, reason: object, shown: str
) -> None:
    """R6.8: a pre-execute listener whose ``Deny`` is refused raises: the call's result is
    the error that names the mistake, never ``Error: None`` or a bare ``Error: ``."""
    assert (await _denied_with(reason)).startswith(shown)


async def test_a_prompt_blocked_with_a_reason_of_another_type_ends_the_turn_naming_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.6: the listener's ``Block(None)`` raises where it is built; the turn ends with an
    error naming the field, and no prompt is logged as blocked."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        policies: dict[str, str] = {}
        rt.hooks.on("agent/prompt-submit", lambda *_: Block(policies.get("prompt")))  # type: ignore[arg-type,call-overload]
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    assert result.reason.kind == "error"
    assert result.reason.message == "Block.reason must be a str, got None"
    assert of_type(agent.session.events, "prompt/blocked") == []


async def test_a_prompt_blocked_with_a_blank_reason_is_rejected_as_one_without_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.6, R7.12: ``Block(" ")`` builds and blocks the prompt, the turn ending rejected with the
    fallback reason rather than in an error."""
    async with runtime(ScriptedModel([Reply("never")])) as rt:
        rt.hooks.on("agent/prompt-submit", lambda *_: Block(" "))
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    assert (result.reason.kind, result.reason.reason) == ("rejected", "prompt blocked by hook")
    (blocked,) = of_type(agent.session.events, "prompt/blocked")
    assert blocked.data.reason == ""  # type: ignore[union-attr]


async def _post_blocked(block: Callable[[], Block]) -> str:
    """What the model is shown for a call whose result a post-execute listener blocks."""
    model = ScriptedModel([CallTools([ToolCallSpec("remove", '{"path": "x"}')]), Reply("ok")])
    async with runtime(model, tools=[remove]) as rt:
        rt.hooks.on("tools/post-execute", lambda *_: block())
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
    (event,) = of_type(agent.session.events, "tool/result")
    assert event.data.is_error  # type: ignore[union-attr]
    return texts(event.data.content)  # type: ignore[union-attr]


async def test_a_tool_result_blocked_with_a_blank_reason_shows_the_feedback_or_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.9: beside feedback a blank reason is never shown, so it is taken; alone it is no
    reason, and the listener's Block is refused as one with neither, never ``Error: ``."""
    assert await _post_blocked(lambda: Block("\n", feedback="use the sandbox")) == (
        "use the sandbox"
    )
    assert "returned a Block with neither feedback nor a reason" in await _post_blocked(
        lambda: Block(" ")
    )
