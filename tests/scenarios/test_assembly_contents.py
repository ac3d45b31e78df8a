"""What a ``system-prompt/assemble`` result may hold (R7.51, R7.52; docs/hooks.md)."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing

from retinue.prompt import Assembly, Section
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, echo, runtime

Rewrite = Callable[[Assembly], Assembly]


def _add(section: object) -> Rewrite:
    return lambda assembly: attrs.evolve(assembly, sections=(*assembly.sections, section))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rewrite", "problem"),
    [
        (_add("Answer briefly."), "a section that is str, not Section"),
        (_add(Section("rules", "Answer briefly.", order="10")), "order '10', not an int"),  # type: ignore[arg-type]
        (_add(Section("rules", "Answer briefly.", order=True)), "order True, not an int"),
        (_add(Section("rules", "Answer briefly.", order=1.5)), "order 1.5, not an int"),  # type: ignore[arg-type]
        (_add(Section(7, "Answer briefly.")), "a section named 7, not a str"),  # type: ignore[arg-type]
        (lambda assembly: attrs.evolve(assembly, tools=("echo",)), "a tool that is str"),
        (
            lambda assembly: attrs.evolve(assembly, tools=(*assembly.tools, *assembly.tools)),
            "two tools named 'echo'",
        ),
    ],
    ids=["str section", "str order", "bool order", "float order", "int name", "str tool", "dup"],
)
async def test_an_assembly_holding_the_wrong_types_ends_the_turn_with_a_hook_error(
    autojump_clock: trio.testing.MockClock, rewrite: Rewrite, problem: str
) -> None:
    """R7.51 / docs/hooks.md: a listener result of the wrong type counts as a raise with a
    ``HookError`` (``INVALID_HOOK_RESULT``) naming the mistake, for an ``Assembly``'s contents as
    for the ``Assembly`` itself; no request is sent, and the agent serves on. No request carries two
    tools of one name, which providers refuse naming neither."""
    model = ScriptedModel([Reply("ok")])
    rewrites = [rewrite]

    def assemble(_agent: object, assembly: Assembly, _next: object) -> Assembly:
        return rewrites.pop()(assembly) if rewrites else assembly

    async with runtime(model, tools=[echo], system_prompt="Be kind.") as rt:
        rt.hooks.on("system-prompt/assemble", assemble)
        agent = await rt.create_agent("a", OPTIONS)
        failed = await agent.ask("hi")
        assert model.requests == []
        served = await agent.ask("again")
    assert failed.reason.kind == "error"
    assert failed.reason.code == "INVALID_HOOK_RESULT"
    assert failed.reason.message is not None
    assert failed.reason.message.startswith("system-prompt/assemble returned an Assembly with")
    assert problem in failed.reason.message
    assert served.reason.kind == "completed"
    assert model.requests[0].system == "Be kind."


async def test_sections_of_any_int_order_are_rendered_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51: a negative or large ``order`` is an int like any other."""
    model = ScriptedModel([Reply("ok")])

    def assemble(_agent: object, assembly: Assembly, _next: object) -> Assembly:
        extra = (Section("last", "Last.", 10**6), Section("first", "First.", -(10**6)))
        return attrs.evolve(assembly, sections=(*assembly.sections, *extra))

    async with runtime(model, system_prompt="Middle.") as rt:
        rt.hooks.on("system-prompt/assemble", assemble)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert result.reason.kind == "completed"
    assert model.requests[0].system == "First.\n\nMiddle.\n\nLast."
