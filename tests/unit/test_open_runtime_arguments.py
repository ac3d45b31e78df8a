"""``open_runtime`` refuses a malformed argument with a ConfigError naming it (R13.1, R13.2).

Refused before anything opens, rather than accepted to fail every turn later
(a tool order of one string names its letters) or escaping as a bare
``TypeError`` from deep inside.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

import retinue
from retinue.config import LoopConfig
from retinue.providers import ModelRequest, StreamChunk
from retinue.testing import Reply, ScriptedModel


@retinue.tool
async def search(query: str) -> str:
    """Search.

    Args:
        query: What to look for.
    """
    return query


MODEL = ScriptedModel([Reply("ok")], repeat_last=True)


class _StoreWithoutDurable:
    """A store written before the protocol had ``durable``: the rest, delegated."""

    def __init__(self) -> None:
        self._inner = retinue.MemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name == "durable":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _UncallableStream:
    """A model whose ``stream`` is there but is no method."""

    stream = 42


class _ClassAdapter:
    """A model adapter written as a class with a static ``stream``."""

    @staticmethod
    def stream(request: ModelRequest) -> AsyncIterator[StreamChunk]:
        return MODEL.stream(request)


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"tool_order": "search"}, r"^tool_order must be a sequence of tool names, got 'search'$"),
    ({"tool_order": 7}, r"^tool_order must be a sequence"),
    ({"tool_order": {"search": 1}}, r"^tool_order must be a sequence"),
    ({"tool_order": {"search"}}, r"^tool_order must be a sequence"),
    ({"tool_order": ["search", 3]}, r"^tool_order\[1\] must be a tool name, got 3$"),
    ({"tool_order": ["search", "*", "search"]}, r'^tool_order lists "search" twice$'),
    ({"tool_order": ["*", "*"]}, r'^tool_order lists "\*" twice$'),
    ({"flush_timeout": "30"}, r"^flush_timeout must be a positive number of seconds"),
    ({"flush_timeout": True}, r"^flush_timeout must be a positive number"),
    ({"flush_timeout": 10**400}, r"^flush_timeout must be a positive number"),
    ({"variables": ["cwd"]}, r"^variables must be a mapping of variable names to text"),
    ({"variables": "cwd"}, r"^variables must be a mapping"),
    ({"variables": {"cwd": 3}}, r"^variables\['cwd'\] must be a string or None, got 3$"),
    ({"variables": {3: "x"}}, r"^variables: a name must be a string, got 3$"),
    ({"variables": {"": "x"}}, r"^variables: '' is not a variable name a template can use"),
    ({"variables": {"user name": "Ann"}}, r"^variables: 'user name' is not a variable name"),
    ({"variables": {"n\u00e4me": "B"}}, r"^variables: 'n\u00e4me' is not a variable name"),
    ({"variables": {"1st": "x"}}, r"^variables: '1st' is not a variable name"),
    ({"models": "gpt-4.1"}, r"^models must be a Model or a mapping"),
    (
        {"models": {"gpt": "gpt-4.1"}},
        r"^models: route 'gpt': a route needs a model adapter \(with stream\(\)\), got 'gpt-4.1'$",
    ),
    ({"models": {3: MODEL}}, r"^models: route 3: a route is a model name or a \(provider"),
    ({"tools": "search"}, r"^tools must be a collection of Tools, got 'search'$"),
    ({"tools": [search, print]}, r"^tools\[1\] must be a Tool, got <built-in function print>$"),
    ({"store": "sessions.db"}, r"^store must be None or a session store, got 'sessions.db'$"),
    # A class has every method, unbound: the instance was meant.
    ({"store": retinue.MemoryStore}, r"^store must be None or a session store, got <class "),
    ({"models": ScriptedModel}, r"^models must be a Model or a mapping .*, got <class "),
    # The protocol's own check reads only that the attribute is there.
    ({"models": _UncallableStream()}, r"^models must be a Model or a mapping .*, got <"),
    ({"models": {"gpt": _UncallableStream()}}, r"^models: route 'gpt': a route needs "),
    ({"models": {"gpt": ScriptedModel}}, r"^models: route 'gpt': a route needs .*, got <class "),
    (
        {"models": {"gpt": MODEL, (None, "gpt"): MODEL}},
        r"^models: an adapter is already registered for \['gpt'\]$",
    ),
    ({"models": {"": MODEL}}, r"^models: route '': a model name or provider is a non-empty str"),
    ({"restart": 3}, r"^restart must be None or of type RestartPolicy, got 3$"),
    ({"retry": 3}, r"^retry must be None or of type RetryPolicy, got 3$"),
    ({"admission": {}}, r"^admission must be None or of type AdmissionController, got \{\}$"),
    ({"config": {"agents": []}}, r"^config must be None or of type LoopConfig"),
    (
        {"max_parallel_tool_calls": 4, "config": LoopConfig(max_parallel_tool_calls=3)},
        r"^max_parallel_tool_calls \(4\) and config \(max_parallel_tool_calls 3\) both set",
    ),
    (
        {"max_parallel_tool_calls": 2, "config": LoopConfig()},
        (
            r"^max_parallel_tool_calls \(2\) and config \(max_parallel_tool_calls 10, the "
            r"default when it sets none\) both set the tool-call cap; set it in one of them$"
        ),
    ),
    (
        {"max_parallel_tool_calls": 0, "config": LoopConfig()},
        r"^max_parallel_tool_calls must be a positive integer, got 0$",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "message"), REFUSED, ids=[reprlib.repr(a) for a, _ in REFUSED]
)
async def test_open_runtime_refuses_a_malformed_argument_naming_it(
    arguments: dict[str, Any], message: str
) -> None:
    """R13.1, R13.2: each malformed argument is a ConfigError whose message names it."""
    arguments = {"models": MODEL, "tools": [search], **arguments}
    with pytest.raises(retinue.ConfigError, match=message):
        async with retinue.open_runtime(**arguments):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body


ACCEPTED: list[dict[str, Any]] = [
    {"tool_order": ["search", "*"]},
    {"tool_order": ("*", "search")},
    {"tool_order": {"search": 1, "*": 2}.keys()},
    {"tool_order": (name for name in ["search"])},
    {"flush_timeout": math.inf},
    {"flush_timeout": 2},
    {"variables": {"team": "core", "unset": None}},
    {"variables": {"_team.name-2": "core"}},
    {"max_parallel_tool_calls": None},
    {"max_parallel_tool_calls": None, "config": LoopConfig(max_parallel_tool_calls=2)},
    {"models": {"scripted": MODEL}},
    {"models": {"scripted": MODEL, ("openai", "gpt-4.1"): MODEL}},
    {"tools": (tool for tool in [search])},
    {"retry": retinue.RetryPolicy(), "admission": retinue.AdmissionController()},
    {"restart": retinue.RestartPolicy()},
    {"store": _StoreWithoutDurable()},
    # A class whose stream needs no instance is an adapter as it is.
    {"models": _ClassAdapter},
    {"models": {"scripted": _ClassAdapter}},
]


@pytest.mark.parametrize("arguments", ACCEPTED, ids=[",".join(a) for a in ACCEPTED])
async def test_open_runtime_accepts_well_formed_arguments(arguments: dict[str, Any]) -> None:
    """R13.1: what the signature describes still opens, and a turn runs with it."""
    arguments = {"models": MODEL, "tools": [search], **arguments}
    async with retinue.open_runtime(**arguments) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="scripted"))
        result = await agent.ask("hi")
    assert result.reason.kind == "completed"


async def test_open_runtime_takes_a_cap_equal_to_its_config_s() -> None:
    """R13.1: a cap given beside a config with the same cap drops nothing, and is taken."""
    config = LoopConfig(max_parallel_tool_calls=4)
    async with retinue.open_runtime(models=MODEL, max_parallel_tool_calls=4, config=config) as rt:
        assert rt.max_parallel_tool_calls == 4
