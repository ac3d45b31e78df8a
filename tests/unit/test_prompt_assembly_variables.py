"""An assembly's variables are a frozen copy: listeners change them only by returning one (R7.51)."""

from __future__ import annotations

import contextlib
import copy
import pickle

import pytest
import trio
import trio.testing

from retinue.prompt import Assembly, Section
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, Next, runtime


def test_assembly_variables_refuse_changes_and_ignore_the_given_mapping() -> None:
    """R7.51: what an assembly renders with is fixed when it is built."""
    given = {"who": "Ada"}
    assembly = Assembly([Section("persona", "Hi {{who}}")], [], given)
    given["who"] = "Mallory"
    with pytest.raises(TypeError, match=r"variables are read-only"):
        assembly.variables["who"] = "Mallory"  # type: ignore[index]
    assert assembly.render() == "Hi Ada"
    # Still a value like any other: copied, pickled and merged as a dict is.
    assert copy.deepcopy(assembly) == pickle.loads(pickle.dumps(assembly)) == assembly
    assert {**assembly.variables, "tone": "dry"} == {"who": "Ada", "tone": "dry"}


async def test_an_assemble_listener_cannot_change_the_assembly_the_others_receive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.51, R6.3: every listener of the chain receives the same starting assembly: a listener that
    sets ``assembly.variables[...]`` in place cannot change what the listeners after it receive or
    what the request's prompt says.
    """
    model = ScriptedModel([Reply("ok")])
    seen: list[str | None] = []

    async def overwrite(agent: object, assembly: Assembly, call_next: Next) -> Assembly:
        # Refused: the listener carries on, as one that tried it by mistake would.
        with contextlib.suppress(TypeError):
            assembly.variables["who"] = "Mallory"  # type: ignore[index]
        return await call_next()

    async def read(agent: object, assembly: Assembly, call_next: Next) -> Assembly:
        seen.append(assembly.variables["who"])
        return await call_next()

    # runtime() holds the body to a virtual deadline.
    async with runtime(model, system_prompt="Hi {{who}}", variables={"who": "Ada"}) as rt:
        rt.hooks.on("system-prompt/assemble", overwrite)
        rt.hooks.on("system-prompt/assemble", read)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert result.reason.kind == "completed"
    assert seen == ["Ada"]
    [request] = model.requests
    assert request.system == "Hi Ada"


def test_an_assembly_hashes_as_the_frozen_value_it_is() -> None:
    """R7.51: equal assemblies hash alike, so one can key a cache of rendered prompts; hashing one
    raises no TypeError (its variables' hash, a dict's)."""
    built = [Assembly([Section("persona", "Hi {{who}}")], [], {"who": "Ada"}) for _ in range(2)]
    assert hash(built[0]) == hash(built[1])
    assert len({*built, Assembly([], [], {"who": "Ada"})}) == 2
