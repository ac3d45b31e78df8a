"""The model seam: ``stream(request)`` yields chunks; a router picks the adapter (SPEC 10)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Any, Protocol, TypeAlias, final, overload, runtime_checkable

import attrs
import trio

from retinue._checks import needs_an_instance
from retinue._errors import DuplicateAdapterError, NoAdapterError
from retinue._request import ModelRequest
from retinue._stream import StreamChunk

__all__ = ["Model", "ModelRouter", "RouteKey"]

_ROUTES_SHOWN = 10
"""How many routes an error message names (a router may hold thousands)."""

RouteKey: TypeAlias = str | tuple[str | None, str]
"""A route: a model name (any provider), or a ``(provider, model name)`` pair."""


@runtime_checkable
class Model(Protocol):
    """A model adapter: one async iterator of chunks per request.

    Obligations (R10.2): ``usage`` before ``finish``, nothing after ``finish``,
    tool arguments stay raw JSON text, and cancellation (trio's) closes the call.
    Failures either raise from the iterator or end with an error/aborted finish.
    The stream is the step's schedule point: it must checkpoint (an adapter reading
    the network does). One that yields its chunks without ever awaiting (a cache
    replaying them, say) runs the agent's steps without yielding to other tasks,
    and a cancel reaches the turn only at a tool's await.
    """

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Start the call and return its chunk iterator."""
        ...


def is_adapter(model: object) -> bool:
    """Whether *model* is a model adapter: an object with ``stream()``, not a class needing one.

    The protocol's check reads only that ``stream`` is there: one that cannot be
    called would fail every turn naming no model.
    """
    return (
        not needs_an_instance(model, "stream")
        and isinstance(model, Model)
        and callable(getattr(model, "stream", None))
    )


def _check_default(
    _router: object, _attribute: attrs.Attribute[Model | None], model: Model | None
) -> None:
    if model is not None and not is_adapter(model):
        raise TypeError(f"the default needs a model adapter (with stream()), got {model!r}")


@final
@attrs.define(eq=False)
class ModelRouter:
    """Routes requests by ``(provider, model)`` to adapters (R10.7).

    A route with provider ``None`` serves that model name for any provider;
    ``default`` (if given) serves everything else.
    """

    _routes: dict[tuple[str | None, str], Model] = attrs.field(factory=dict, init=False)
    default: Model | None = attrs.field(default=None, validator=_check_default)

    # One overload per key shape: a mapping's key type is invariant, so a dict
    # keyed by (str, str) pairs alone is no Mapping of the wider key type.
    @overload
    @classmethod
    def of(
        cls, routes: Mapping[RouteKey, Model], *, default: Model | None = None
    ) -> ModelRouter: ...
    @overload
    @classmethod
    def of(cls, routes: Mapping[str, Model], *, default: Model | None = None) -> ModelRouter: ...
    @overload
    @classmethod
    def of(
        cls, routes: Mapping[tuple[str, str], Model], *, default: Model | None = None
    ) -> ModelRouter: ...
    @overload
    @classmethod
    def of(
        cls, routes: Mapping[tuple[str | None, str], Model], *, default: Model | None = None
    ) -> ModelRouter: ...
    @classmethod
    def of(cls, routes: Mapping[Any, Model], *, default: Model | None = None) -> ModelRouter:
        """Build a router from a mapping; a plain string key is a model name.

        Raises:
            TypeError: *routes* is no mapping; a key is neither a model name nor a
                ``(provider, model name)`` pair, or a value is no model adapter, the
                message starting with the key; or *default* is no model adapter.
            DuplicateAdapterError: two keys name one route.
        """
        if not isinstance(routes, Mapping):
            raise TypeError(f"routes must be a mapping of routes to model adapters, got {routes!r}")
        router = cls(default)
        for key, model in routes.items():
            try:
                name, provider = _route(key)
                router.add(model, name, provider=provider)
            except TypeError as exc:
                raise TypeError(f"route {key!r}: {exc}") from None
        return router

    def add(self, model: Model, *names: str, provider: str | None = None) -> None:
        """Register *model* for each name; all-or-nothing on duplicates (R10.7).

        Raises:
            TypeError: *model* is no model adapter (a class, say), no name is
                given, or a name or the provider is not a non-empty str.
            DuplicateAdapterError: a name is taken, or given twice.
        """
        _check_route(model, names, provider)
        keys = [(provider, name) for name in names]
        taken = [name for key, name in zip(keys, names, strict=True) if key in self._routes]
        if taken:
            raise DuplicateAdapterError(f"an adapter is already registered for {taken}")
        twice = sorted(name for name, count in Counter(names).items() if count > 1)
        if twice:
            raise DuplicateAdapterError(f"model names given twice: {twice}")
        for key in keys:
            self._routes[key] = model

    def resolve(self, provider: str | None, model: str) -> Model:
        """Return the adapter for ``(provider, model)``; raises :class:`NoAdapterError`."""
        # ``is None``, not ``or``: an adapter may be falsy (a sized one, empty).
        found = self._routes.get((provider, model))
        if found is None:
            found = self._routes.get((None, model))
        if found is None:
            found = self.default
        if found is None:
            raise NoAdapterError(
                f"no adapter serves model {model!r} (provider {provider!r}); {self._listed()}"
            )
        return found

    def route(self, provider: str | None, model: str) -> tuple[Model, str | None]:
        """The adapter for ``(provider, model)`` and the provider of the route that matched:
        *provider* for an exact ``(provider, model)`` route, ``None`` for a route of the
        model name alone or the default. Raises :class:`NoAdapterError`.
        """
        found = self._routes.get((provider, model))
        if found is not None:
            return found, provider
        return self.resolve(provider, model), None

    def _listed(self) -> str:
        """The routes, for an error message: a few of them, and how many more there are."""
        if not self._routes:
            return "the router has no routes and no default"
        shown = [name if provider is None else (provider, name) for provider, name in self._routes]
        more = len(shown) - _ROUTES_SHOWN
        listed = ", ".join(repr(route) for route in shown[:_ROUTES_SHOWN])
        return f"the routes are {listed}" + (f" and {more} more" if more > 0 else "")

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Route *request* and start its stream.

        A request no adapter serves gets an iterator all the same, which
        raises :class:`NoAdapterError` when iterated: a :class:`Model`'s
        failures come from its iterator.
        """
        try:
            model = self.resolve(request.provider, request.model)
        except NoAdapterError as error:
            return _raising(error)
        return model.stream(request)

    @property
    def routes(self) -> Iterable[tuple[str | None, str]]:
        """The registered ``(provider, model)`` keys."""
        return tuple(self._routes)


async def _raising(error: NoAdapterError) -> AsyncGenerator[StreamChunk, None]:  # noqa: ASYNC911 - it only raises
    """A stream that fails with *error* when iterated, at a checkpoint as a call would."""
    await trio.lowlevel.checkpoint()
    raise error
    yield  # never reached: it makes this an async generator


def _route(key: object) -> tuple[str, str | None]:
    """The model name and provider of a routing key: a name, or a (provider, name) pair."""
    if isinstance(key, str):
        return key, None
    if isinstance(key, tuple) and len(key) == 2:
        provider, name = key
        return name, provider
    raise TypeError("a route is a model name or a (provider, model name) pair")


def _check_route(model: object, names: tuple[object, ...], provider: object) -> None:
    if not is_adapter(model):
        raise TypeError(f"a route needs a model adapter (with stream()), got {model!r}")
    if not names:
        raise TypeError("a route needs at least one model name")
    for value in (*names, *([] if provider is None else [provider])):
        if not isinstance(value, str) or not value:
            raise TypeError(f"a model name or provider is a non-empty str, got {value!r}")
