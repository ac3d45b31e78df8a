"""The model router: routes by (provider, model) and refuses a route that could serve nothing (R10.7)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from retinue import ModelRouter
from retinue._errors import DuplicateAdapterError, NoAdapterError
from retinue.providers import LlmCallConfig, MessageHistory, ModelRequest, StreamChunk
from retinue.testing import Reply, ScriptedModel

MODEL = ScriptedModel([Reply("ok")])


@pytest.mark.parametrize(
    ("routes", "problem"),
    [
        ({("a", "b", "c"): MODEL}, "route ('a', 'b', 'c'): a route is a model name or a (provider"),
        ({5: MODEL}, "route 5: a route is a model name or a (provider, model name) pair"),
        (
            {"a": "not a model"},
            "route 'a': a route needs a model adapter (with stream()), got 'not",
        ),
        (
            {"a": ScriptedModel},
            "route 'a': a route needs a model adapter (with stream()), got <class",
        ),
        ({"": MODEL}, "route '': a model name or provider is a non-empty str, got ''"),
        (
            {("", "a"): MODEL},
            "route ('', 'a'): a model name or provider is a non-empty str, got ''",
        ),
    ],
    ids=["three-part-key", "int-key", "str-model", "model-class", "empty-name", "empty-provider"],
)
def test_a_route_that_could_serve_nothing_is_refused_naming_it(
    routes: dict[Any, Any], problem: str
) -> None:
    """R10.7: a route that could serve nothing is a TypeError naming it, not a bare unpacking error,
    nor taken silently to fail every turn."""
    with pytest.raises(TypeError) as caught:
        ModelRouter.of(routes)
    assert str(caught.value).startswith(problem)


@pytest.mark.parametrize("routes", [None, [("a", MODEL)], "a"], ids=["none", "pairs", "str"])
def test_routes_that_are_no_mapping_are_refused_naming_them(routes: Any) -> None:
    """R10.7: a TypeError that says what ``of`` takes, not an AttributeError on ``items``."""
    with pytest.raises(TypeError, match=r"^routes must be a mapping of routes to model adapters"):
        ModelRouter.of(routes)


class _StaticAdapter:
    @staticmethod
    def stream(request: ModelRequest) -> AsyncIterator[StreamChunk]:
        return MODEL.stream(request)


def test_a_class_whose_stream_needs_no_instance_is_an_adapter() -> None:
    """R10.7: only a class whose ``stream`` needs an instance is refused (its instance was
    meant); one with a static ``stream`` serves as it is."""
    router = ModelRouter.of({"a": _StaticAdapter})
    assert router.resolve(None, "a") is _StaticAdapter


def test_add_needs_a_name_and_names_each_one_once() -> None:
    """R10.7: a call naming nothing is refused rather than registering nothing silently; one naming
    a model twice says so, not that it is registered already, though nothing is."""
    router = ModelRouter()
    with pytest.raises(TypeError, match=r"^a route needs at least one model name$"):
        router.add(MODEL)
    with pytest.raises(DuplicateAdapterError, match=r"^model names given twice: \['a'\]$"):
        router.add(MODEL, "a", "b", "a")
    assert router.routes == ()
    router.add(MODEL, "a")
    with pytest.raises(
        DuplicateAdapterError, match=r"^an adapter is already registered for \['a'\]$"
    ):
        router.add(MODEL, "a")


class _Sized:
    """A model adapter that is falsy: it defines ``__len__`` (say, its requests in flight)."""

    def __len__(self) -> int:
        return 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in MODEL.stream(request):  # pragma: no cover - only routed here
            yield chunk


def test_a_falsy_adapter_for_a_provider_is_still_the_one_resolved() -> None:
    """R10.7: the provider's own route wins over the provider-free one, whatever the adapter's truth
    value: an empty sized adapter is not passed over as an ``or`` would."""
    specific, generic = _Sized(), ScriptedModel([Reply("generic")])
    router = ModelRouter()
    router.add(specific, "claude", provider="anthropic")
    router.add(generic, "claude")
    assert router.resolve("anthropic", "claude") is specific
    assert router.resolve("openai", "claude") is generic
    with pytest.raises(NoAdapterError):
        router.resolve("openai", "gpt")


def test_route_names_the_provider_of_an_exact_route_only() -> None:
    """R10.7: ``route`` gives the adapter ``resolve`` gives, with the provider of the route that
    matched: the request's for an exact ``(provider, model)`` route, ``None`` for a route of the
    model name alone or the default."""
    specific, generic, default = _Sized(), ScriptedModel([]), ScriptedModel([])
    router = ModelRouter.of({("azure", "gpt-4o"): specific, "gpt-4o": generic}, default=default)
    assert router.route("azure", "gpt-4o") == (specific, "azure")
    assert router.route("openai", "gpt-4o") == (generic, None)
    assert router.route(None, "gpt-4o") == (generic, None)
    assert router.route("azure", "o3") == (default, None)


def test_an_unknown_model_is_refused_naming_the_model_and_the_routes() -> None:
    """R10.7: ``NO_ADAPTER`` names the model and the routes the router has, so a model
    routed only for a provider, asked for without one, shows what was registered."""
    router = ModelRouter.of({("openai", "gpt-4.1-mini"): MODEL, "deepseek-chat": MODEL})
    with pytest.raises(NoAdapterError) as caught:
        router.resolve(None, "gpt-4.1-mini")
    message = str(caught.value)
    assert caught.value.code == "NO_ADAPTER"
    assert "'gpt-4.1-mini' (provider None)" in message
    assert "('openai', 'gpt-4.1-mini')" in message
    assert "'deepseek-chat'" in message


def test_a_router_without_routes_says_it_has_none() -> None:
    """R10.7: an empty router's ``NO_ADAPTER`` says it has no routes and no default."""
    with pytest.raises(NoAdapterError, match=r"the router has no routes and no default$"):
        ModelRouter().resolve("openai", "gpt")


def test_a_long_list_of_routes_is_cut_short_in_the_message() -> None:
    """R10.7: the message names a few routes and counts the rest, whatever the router holds."""
    router = ModelRouter.of({f"model-{index:03d}": MODEL for index in range(500)})
    with pytest.raises(NoAdapterError) as caught:
        router.resolve(None, "other")
    message = str(caught.value)
    assert "'model-000'" in message
    assert "and 490 more" in message
    assert len(message) < 400


async def test_an_unknown_route_fails_from_the_stream_not_when_it_is_asked_for() -> None:
    """R10.3, R10.7: ``stream()`` returns an iterator whatever the route, as the ``Model``
    protocol promises; ``NO_ADAPTER`` is raised from it, where a caller handles a failed
    call, not by the call that builds it."""
    request = ModelRequest(LlmCallConfig("gpt", "openai"), MessageHistory([]))
    chunks = ModelRouter.of({"claude": MODEL}).stream(request)
    with pytest.raises(NoAdapterError, match=r"no adapter serves model 'gpt'"):
        await anext(chunks)


@pytest.mark.parametrize("default", ["not a model", ScriptedModel], ids=["str", "model-class"])
def test_a_default_that_could_serve_nothing_is_refused(default: Any) -> None:
    """R10.7: a default that is no model adapter is refused when the router is built, as a route's
    is, not taken for every request it serves to fail with an ``AttributeError`` or a
    missing-argument ``TypeError``."""
    with pytest.raises(TypeError, match=r"^the default needs a model adapter \(with stream\(\)\)"):
        ModelRouter.of({"a": MODEL}, default=default)
    with pytest.raises(TypeError, match=r"^the default needs a model adapter"):
        ModelRouter(default=default)
