"""ScriptedModel refusals: steps are frozen values refusing bad delays and counts naming the field,
scripts refuse an empty repeat or a non-step, and a non-step from a step function ends the turn with
an error."""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
import pytest
import trio

import retinue
from retinue._request import ModelRequest
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    FinishAborted,
    FinishWithError,
    Hang,
    RaiseMidStream,
    RawChunks,
    Reply,
    ScriptedModel,
    ScriptExhaustedError,
    Step,
    ToolCallSpec,
)
from tests.unit._scripted_model_kit import play, request


def test_scripted_steps_are_frozen_comparable_values() -> None:
    """Steps compare by their fields, not by their pre-built chunks, and cannot be mutated."""
    assert Reply("x", chunks=2) == Reply("x", chunks=2)
    assert CallTools([ToolCallSpec("a")]) == CallTools((ToolCallSpec("a"),))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Reply("x").text = "y"  # type: ignore[misc]


@pytest.mark.parametrize(
    "build",
    [
        lambda: Reply("x", delay=-1),
        lambda: Reply("x", chunks=0),
        lambda: CallTools([ToolCallSpec("a")], chunks_per_call=0),
        lambda: Hang(chunk_delay=-0.1),
    ],
)
def test_scripted_steps_reject_negative_delays_and_zero_chunks(build) -> None:
    """Delays must be non-negative and chunk counts positive."""
    with pytest.raises(ValueError):
        build()


@pytest.mark.parametrize(
    ("build", "error", "field", "value"),
    [
        (lambda: Reply("hello", delay=math.nan), ValueError, "delay", "nan"),
        (lambda: Reply("hello", chunk_delay=math.nan), ValueError, "chunk_delay", "nan"),
        (lambda: Hang(delay=math.nan), ValueError, "delay", "nan"),
        (lambda: RawChunks([], delay=math.inf), ValueError, "delay", "inf"),
        (lambda: FinishAborted(delay=True), TypeError, "delay", "True"),
        (
            lambda: FinishWithError("x", chunk_delay="1"),  # type: ignore[arg-type]
            TypeError,
            "chunk_delay",
            "'1'",
        ),
        (
            lambda: Reply("x", chunks=2.5),  # type: ignore[arg-type]
            TypeError,
            "chunks",
            "2.5",
        ),
        (lambda: Reply("hello", chunks=True), TypeError, "chunks", "True"),
        (
            lambda: CallTools([ToolCallSpec("a")], text_chunks=2.0),  # type: ignore[arg-type]
            TypeError,
            "text_chunks",
            "2.0",
        ),
        (
            lambda: CutAtMaxTokens("x", chunks=None),  # type: ignore[arg-type]
            TypeError,
            "chunks",
            "None",
        ),
        (
            lambda: RaiseMidStream(ValueError(), after_chunks=True),
            TypeError,
            "after_chunks",
            "True",
        ),
        (lambda: RaiseMidStream(ValueError(), after_chunks=-1), ValueError, "after_chunks", "-1"),
    ],
)
def test_scripted_steps_reject_non_finite_delays_and_non_int_counts_naming_the_field(
    build: Any, error: type[Exception], field: str, value: str
) -> None:
    """Delays are finite numbers >= 0 and counts ints (not bools); the error names field and value."""
    with pytest.raises(error, match=rf"^{field} must .*, got {value}$"):
        build()


@pytest.mark.parametrize(
    ("calls_per_step", "error"),
    [(0, ValueError), (-3, ValueError), (1.5, TypeError), (True, TypeError)],
)
def test_scripted_model_tool_loop_refuses_a_step_without_calls(
    calls_per_step: Any, error: type[Exception]
) -> None:
    """``tool_loop`` needs at least one call per step, or the turn would neither call nor answer."""
    with pytest.raises(error, match=rf"^calls_per_step must .*, got {calls_per_step!r}$"):
        ScriptedModel.tool_loop(["t"], calls_per_step=calls_per_step)


@retinue.tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return key


@pytest.mark.parametrize(
    ("tool_names", "message"),
    [
        (
            [lookup],
            r"^tool_names\[0\] must .*, got a Tool: pass its name, 'lookup'$",
        ),
        (["a", 3], r"^tool_names\[1\] must be a tool's name \(a str\), got a int$"),
        ({"a", "b"}, r"^tool_names must be a list of names, got \{"),
    ],
    ids=["a-tool", "an-int", "a-set"],
)
def test_scripted_model_tool_loop_refuses_tool_names_that_are_no_list_of_names(
    tool_names: object, message: str
) -> None:
    """``tool_loop`` takes the tools' names, in an order to cycle through: a tool object or a set is
    refused naming the parameter and the fix, not as ``ToolCallSpec.name must be a str`` or ``'set'
    object is not subscriptable``."""
    with pytest.raises(TypeError, match=message):
        ScriptedModel.tool_loop(tool_names)  # type: ignore[arg-type]


def test_scripted_model_tool_loop_refuses_arguments_that_are_no_mapping() -> None:
    """``arguments`` maps tool names to JSON text: a list of pairs is refused as such, not as naming
    tools not in ``tool_names``, though every name in it is one."""
    with pytest.raises(TypeError, match=r"^arguments must map tool names to JSON text, got \["):
        ScriptedModel.tool_loop(["a"], arguments=[("a", "{}")])  # type: ignore[arg-type]


def test_scripted_model_tool_loop_names_unknown_arguments_keys_of_any_type() -> None:
    """``arguments`` keys that name no tool are listed whatever their types, not lost to a
    ``'<' not supported between instances of 'str' and 'int'`` from sorting them."""
    with pytest.raises(ValueError, match=r"^arguments names tools not in tool_names: \['b', 1\]$"):
        ScriptedModel.tool_loop(["a"], arguments={"b": "{}", 1: "{}"})  # type: ignore[dict-item]


def test_scripted_call_tools_refuses_an_empty_list_pointing_to_raw_chunks() -> None:
    """A ``CallTools`` step asks for at least one call; ``RawChunks`` covers the edge case."""
    with pytest.raises(ValueError, match=r"calls must hold at least one call.*RawChunks"):
        CallTools([])


def test_scripted_model_repeat_last_refuses_an_empty_sequence() -> None:
    """``repeat_last=True`` with no step to repeat is refused at construction, naming the script."""
    with pytest.raises(
        ValueError, match=r"repeat_last=True needs a last step.*the script is empty"
    ):
        ScriptedModel([], repeat_last=True)
    with pytest.raises(ValueError, match=r"the script for model 'b' is empty"):
        ScriptedModel({"a": [Reply("a")], "b": []}, repeat_last=True)
    assert ScriptedModel([], repeat_last=False).statistics().remaining == 0


@pytest.mark.parametrize(
    ("bound", "error", "message"),
    [
        ("10", TypeError, "keep_requests must be an int, got '10'"),
        (2.5, TypeError, "keep_requests must be an int, got 2.5"),
        (True, TypeError, "keep_requests must be an int, got True"),
        (-1, ValueError, "keep_requests must be >= 0, got -1"),
    ],
)
def test_scripted_model_refuses_a_request_bound_that_is_no_count_naming_it(
    bound: object, error: type[Exception], message: str
) -> None:
    """``keep_requests`` is ``None`` or an int >= 0; anything else is refused naming it, not by the
    record built from it first with ``an integer is required`` or ``maxlen must be non-negative``,
    which name neither the parameter nor what it takes."""
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        ScriptedModel([Reply("x")], keep_requests=bound)  # type: ignore[arg-type]


@pytest.mark.parametrize("flag", ["no", 0, None])
def test_scripted_model_refuses_a_repeat_last_that_is_no_bool(flag: object) -> None:
    """``repeat_last`` is True or False: ``repeat_last="no"`` is refused, not taken as true to
    replay the script's last step where the test expects ScriptExhaustedError."""
    with pytest.raises(TypeError, match=r"^repeat_last must be True or False, got "):
        ScriptedModel([Reply("x")], repeat_last=flag)  # type: ignore[arg-type]


def test_scripted_model_refuses_a_script_mapping_keyed_by_no_model_name() -> None:
    """A script mapping is keyed by model name: a key of another type is refused, not kept with a
    script that never plays while every request fails as having no script."""
    with pytest.raises(TypeError, match=r"keyed by model name \(a str\), got the key 5$"):
        ScriptedModel({"a": [Reply("a")], 5: [Reply("five")]})  # type: ignore[dict-item]


async def test_scripted_model_without_a_script_for_the_model_names_those_it_has() -> None:
    """A request for a model with no script names the models scripted (a misspelt one, say), not
    only the model asked for."""
    model = ScriptedModel({"alpha": [Reply("a")], "beta": [Reply("b")]})
    with pytest.raises(
        ScriptExhaustedError,
        match=r"^no script for model 'alhpa'; the scripts are for 'alpha', 'beta'$",
    ):
        await play(model, request("alhpa"))


def test_scripted_model_refuses_a_sequence_holding_a_non_step() -> None:
    """A sequence script is checked when built: the error names the step, script and type."""
    with pytest.raises(TypeError, match=r"step 1 of the script for model 'm': got a str"):
        ScriptedModel({"m": [Reply("ok"), "not a step"]})  # type: ignore[list-item]


async def test_scripted_model_function_returning_a_non_step_raises_type_error() -> None:
    """A step function's result must be a step: the error names the function and the type."""

    def junk(_request: ModelRequest) -> Step:
        return "not a step"  # type: ignore[return-value]

    model = ScriptedModel(junk)
    with pytest.raises(TypeError, match=r"step function .*junk of the script: got a str"):
        await play(model)


async def test_scripted_model_non_step_ends_the_turn_with_an_error_naming_it(
    autojump_clock,
) -> None:
    """Through the runtime, the turn ends ``error`` with a message naming the function and type."""
    model = ScriptedModel(lambda _request: "not a step")  # type: ignore[arg-type,return-value]
    async with retinue.open_runtime(models=model) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
        with trio.fail_after(10):
            result = await agent.ask("hi")
    assert result.reason.kind == "error"
    assert result.reason.message is not None
    assert "step function" in result.reason.message
    assert "got a str ('not a step'), not a script step" in result.reason.message
