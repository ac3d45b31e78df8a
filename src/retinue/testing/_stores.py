"""A store that delegates to another, for tests and benchmarks that observe a real store."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import trio

from retinue._checks import needs_an_instance
from retinue.session import Session, SessionHeader
from retinue.stores._common import already_exists
from retinue.stores._protocol import new_claims
from retinue.stores._writebehind import BufferedStore
from retinue.supervisors._arguments import passes_on

__all__ = ["DelegatingStore"]


class DelegatingStore:
    """Passes every store operation through to *store*; subclass it to observe some.

    Entering and leaving it enters and leaves the wrapped store. It defines every
    method of the store seam as a call of the wrapped store's, so an override
    passes a call on with ``super()`` (``return await super().flush(session)``);
    any other attribute is read from the wrapped store. A subclass overrides only
    what it watches (``flush``, say) and the runtime sees a whole store;
    ``open_runtime`` checks the wrapped store's method for each one not overridden.

    It reports the wrapped store's ``durable``, but a subclass that overrides
    ``flush`` (or takes one from a mixin) is ``durable`` unless the class defining
    that flush, or one below it, says otherwise: the runtime then flushes it
    shielded and bounded by ``flush_timeout``, as a durable store, since its flush
    may block where a ``MemoryStore``'s never does.
    """

    # Declared for the type checker; set only on subclasses, reading the wrapped
    # store's through __getattr__ otherwise.
    durable: bool

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Awaited unshielded and unbounded, as a store that is not durable is, an
        # overridden flush that hangs would hold its agent's end and the runtime's exit.
        # Read by the order of the classes: a mixin's flush is an override too, and a
        # ``durable`` said above the class defining the flush was said of another flush.
        order = cls.__mro__
        flush = next(klass for klass in order if "flush" in vars(klass))
        durable = next((klass for klass in order if "durable" in vars(klass)), None)
        if flush is not DelegatingStore and (
            durable is None or order.index(flush) < order.index(durable)
        ):
            cls.durable = True

    def __init__(self, store: BufferedStore) -> None:
        """Wrap *store*.

        Raises:
            TypeError: *store* is a store class rather than a store: wrapped, it
                would pass the runtime's check of its store and fail at its first
                use, naming a missing ``self``.
        """
        if isinstance(store, type) and needs_an_instance(store, "flush", "load"):
            raise TypeError(
                f"DelegatingStore wraps a store, not a store class: "
                f"DelegatingStore({store.__name__}(...))"
            )
        self.store = store

    async def __aenter__(self) -> Self:
        # A store closed by aclose() alone (as the runtime serves one) has nothing to enter.
        if hasattr(type(self.store), "__aenter__"):
            await self.store.__aenter__()
        else:
            await trio.lowlevel.checkpoint()
        return self

    @passes_on
    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if hasattr(type(self.store), "__aexit__"):
            await self.store.__aexit__(kind, value, tb)
        else:
            await self.store.aclose()

    @passes_on
    def attach(self, session: Session) -> None:
        """Pass on: start buffering *session*'s appends."""
        self.store.attach(session)

    @passes_on
    def attach_new(self, session: Session) -> None:
        """Pass on: start buffering a session that is not stored yet."""
        self.store.attach_new(session)

    @passes_on
    async def flush(self, session: Session) -> None:
        """Pass on: make every buffered event of *session* durable."""
        await self.store.flush(session)

    @passes_on
    async def detach(self, session: Session) -> None:
        """Pass on: flush, then stop tracking *session*."""
        await self.store.detach(session)

    @passes_on
    async def load(self, session_id: str) -> Session:
        """Pass on: load (and repair) a stored session."""
        return await self.store.load(session_id)

    @passes_on
    async def exists(self, session_id: str) -> bool:
        """Pass on: whether *session_id* is stored."""
        return await self.store.exists(session_id)

    async def claim_new(self, session_id: str) -> None:
        """Refuse a stored id, asking :meth:`exists` (which a subclass may watch), then claim
        it in the wrapped store if that store claims new ids (see ``SessionStore``)."""
        if await self.exists(session_id):
            raise already_exists(session_id)
        if (claims := new_claims(self.store)) is not None:
            await claims[0](session_id)

    async def release_new(self, session_id: str) -> None:
        """Give up the wrapped store's claim of *session_id*, if it claims new ids."""
        if (claims := new_claims(self.store)) is not None:
            await claims[1](session_id)
        else:
            await trio.lowlevel.checkpoint()

    @passes_on
    async def aclose(self) -> None:
        """Pass on: drain every buffer, then release storage."""
        await self.store.aclose()

    # Last: within the class body, a later annotation's ``list`` would name this method.
    @passes_on
    async def list(self) -> list[SessionHeader]:
        """Pass on: headers of every stored session."""
        return await self.store.list()

    def __getattr__(self, name: str) -> Any:
        # Reached for ``store`` itself only while it is unset (a subclass whose
        # __init__ skips this one, a copy being built): reading it again would recurse.
        if name == "store":
            raise AttributeError(
                f"{type(self).__name__} has no wrapped store: call DelegatingStore.__init__"
            )
        return getattr(self.store, name)
