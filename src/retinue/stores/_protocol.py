"""The session-store seam the runtime talks to (SPEC 11.1, 11.2)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from retinue.session import Session, SessionHeader

__all__ = ["NewClaims", "SessionStore", "new_claims"]


@runtime_checkable
class SessionStore(Protocol):
    """Durable home of session logs, with write-behind buffering.

    ``attach`` starts buffering a live session's appends (a sync observer,
    R4.9); ``flush`` is the durability checkpoint (R7.49, R11.7): it returns
    once every buffered event is durable, and on failure keeps the buffer for
    a later flush. ``load`` repairs a crashed tail (R11.8, R11.9).

    Optional: a store that is not durable may define, on its class,
    ``flush_nowait(session) -> bool``: commit at once without blocking and
    return ``True``, or do nothing and return ``False`` so that ``flush`` is
    awaited. The loop then ends a turn without a task switch for its flush.
    It is looked up on the class, never through instance attributes, so a
    wrapper that delegates by ``__getattr__`` always has its own ``flush``
    awaited; a subclass that overrides ``flush`` must override this too, or
    refuse (as the built-in stores do).

    Optional too, defined together on the class and looked up alike:
    ``async claim_new(session_id)``, which makes this store the one writer of an
    id not stored yet, raising ``StoreError(SESSION_ALREADY_EXISTS)`` if it is
    stored or another writer (another store of the same storage) holds it, and
    ``async release_new(session_id)``, which gives that claim up unless a session
    was attached under the id by ``attach_new`` (its ``detach`` gives it up then).
    The runtime claims a new agent's id so before its setup, releasing it if the
    creation fails; a store without them is asked ``exists``, and two stores of one
    storage creating one id meet only at the second one's first flush.

    Optional as well: ``async delete(session_id)``, which removes a stored session
    whole (a retention policy's, or ``retinue sessions delete``'s); the runtime
    never calls it. The built-in stores refuse one they hold (``SESSION_TRACKED``)
    or another writer holds (``SESSION_LOCKED``), and an id not stored
    (``SESSION_NOT_FOUND``).
    """

    @property
    def durable(self) -> bool:
        """Whether stored sessions outlive this process (false for ``MemoryStore``).

        A store that is not durable keeps sessions in this process's memory:
        its ``flush`` never blocks and no cancel can interrupt it, so the loop
        flushes it without a shield or a deadline.
        """
        ...

    def attach(self, session: Session) -> None:
        """Start buffering *session*'s appends; events already in it count as stored.

        Of a session this store loaded, only those it loaded: what was appended
        since (an agent's setup runs before publication attaches it) is new.
        """
        ...

    def attach_new(self, session: Session) -> None:
        """Start buffering a session that is not stored yet (all its events are new)."""
        ...

    async def flush(self, session: Session) -> None:
        """Make every buffered event of *session* durable; always a schedule point, and a
        checkpoint unless it commits without blocking (then it commits, cancelled or not)."""
        ...

    async def detach(self, session: Session) -> None:
        """Flush, then stop tracking *session*.

        If the flush fails or is cancelled, *session* is released all the same,
        its unflushed events kept buffered: the next ``load`` of its id takes
        them over. A flush or detach of the released session then raises
        ``StoreError`` rather than return while events it holds are not stored:
        ``SESSION_RELEASED`` for events it appended since (they reach no
        buffer), ``SESSION_TAKEN_OVER`` once the copy a load took is attached
        and until that copy's flush has stored what was buffered. A create
        refused because the id is stored keeps nothing for a load to take over.
        """
        ...

    async def load(self, session_id: str) -> Session:
        """Load (and repair) a stored session; raises ``StoreError`` if unknown."""
        ...

    async def list(self) -> list[SessionHeader]:
        """Headers of every stored session (no event reads)."""
        ...

    async def exists(self, session_id: str) -> bool:
        """Whether *session_id* is stored, without reading any log or listing the store."""
        ...

    async def aclose(self) -> None:
        """Drain every buffer, then release storage."""
        ...


NewClaims = tuple[Callable[[str], Awaitable[None]], Callable[[str], Awaitable[None]]]
"""A store's bound ``claim_new`` and ``release_new``."""


def new_claims(store: object) -> NewClaims | None:
    """*store*'s ``claim_new`` and ``release_new``, bound, if its class defines both; else ``None``.

    Looked up on the class, as ``flush_nowait`` is: a wrapper passing calls on by
    ``__getattr__`` would claim in the store it wraps an id its own ``attach_new``
    and ``detach`` may never pass on.
    """
    kind = type(store)
    claim = getattr(kind, "claim_new", None)
    release = getattr(kind, "release_new", None)
    if claim is None or release is None:
        return None
    return functools.partial(claim, store), functools.partial(release, store)
