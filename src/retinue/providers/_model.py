"""The model seam: ``stream(request)`` yields chunks; a router picks the adapter (SPEC 10)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Protocol, final, runtime_checkable

import attrs

from retinue._errors import DuplicateAdapterError, NoAdapterError
from retinue._request import ModelRequest
from retinue._stream import StreamChunk

__all__ = ["Model", "ModelRouter"]


@runtime_checkable
class Model(Protocol):
    """A model adapter: one async iterator of chunks per request.

    Obligations (R10.2): ``usage`` before ``finish``, nothing after ``finish``,
    tool arguments stay raw JSON text, and cancellation (trio's) closes the call.
    Failures either raise from the iterator or end with an error/aborted finish.
    """

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Start the call and return its chunk iterator."""
        ...


@final
@attrs.define(eq=False)
class ModelRouter:
    """Routes requests by ``(provider, model)`` to adapters (R10.7).

    A route with provider ``None`` serves that model name for any provider;
    ``default`` (if given) serves everything else.
    """

    _routes: dict[tuple[str | None, str], Model] = attrs.field(factory=dict, init=False)
    default: Model | None = None

    @classmethod
    def of(
        cls,
        routes: Mapping[str, Model] | Mapping[tuple[str | None, str], Model],
        *,
        default: Model | None = None,
    ) -> ModelRouter:
        """Build a router from a mapping; a plain string key is a model name."""
        router = cls(default)
        for key, model in routes.items():
            provider, name = (None, key) if isinstance(key, str) else key
            router.add(model, name, provider=provider)
        return router

    def add(self, model: Model, *names: str, provider: str | None = None) -> None:
        """Register *model* for each name; all-or-nothing on duplicates (R10.7)."""
        keys = [(provider, name) for name in names]
        taken = [name for key, name in zip(keys, names, strict=True) if key in self._routes]
        if taken or len(set(keys)) != len(keys):
            raise DuplicateAdapterError(f"an adapter is already registered for {taken or names}")
        for key in keys:
            self._routes[key] = model

    def resolve(self, provider: str | None, model: str) -> Model:
        """Return the adapter for ``(provider, model)``; raises :class:`NoAdapterError`."""
        found = self._routes.get((provider, model)) or self._routes.get((None, model))
        if found is None:
            found = self.default
        if found is None:
            raise NoAdapterError(f"no adapter serves model {model!r} (provider {provider!r})")
        return found

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Route *request* and start its stream."""
        return self.resolve(request.provider, request.model).stream(request)

    @property
    def routes(self) -> Iterable[tuple[str | None, str]]:
        """The registered ``(provider, model)`` keys."""
        return tuple(self._routes)
