"""Decisions check their text fields when built (SPEC 6.3, R6.6, R6.8; docs/hooks.md Decisions)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

import retinue
from retinue import Accept, Allow, Ask, Block, Continue, Deny, Text
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


@pytest.mark.parametrize("reason", ["", "   ", "\n\t", "\u3000"])
def test_an_empty_or_blank_deny_reason_is_refused_when_built(reason: str) -> None:
    """R6.8: a denial's reason is all the model is told, so an empty one is refused, as
    post-execute refuses a ``Block`` with neither feedback nor a reason; one of only
    whitespace tells the model as little."""
    with pytest.raises(ValueError, match=r"Deny\.reason must not be empty or blank"):
        Deny(reason)


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (lambda: Block("  "), r"Block\.reason must not be blank: leave it '' for no reason"),
        (lambda: Block(reason="\n"), r"Block\.reason must not be blank"),
        (lambda: Ask(" \t "), r"Ask\.reason must not be blank: leave it None for no reason"),
    ],
    ids=["Block spaces", "Block newline", "Ask blank"],
)
def test_a_blank_optional_reason_is_refused_when_built(
    build: Callable[[], object], problem: str
) -> None:
    """R6.8, R6.9: a blank reason would be shown as ``Error:`` and nothing else, where an
    empty ``Block`` reason gives way to the feedback and an empty ``Ask`` one to the tool's
    name: a reason of only whitespace is refused, the empty one stays the way to give none."""
    with pytest.raises(ValueError, match=problem):
        build()


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
