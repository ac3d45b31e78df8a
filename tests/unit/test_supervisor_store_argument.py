"""``open_runtime`` refuses a store it could not close as a ConfigError naming it (R13.1).

The runtime closes its store on the way out: with ``async with`` when the
store's class is an async context manager, else with ``aclose()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

import pytest
import trio

import retinue
from retinue.session import Session
from retinue.testing import DelegatingStore, Reply, ScriptedModel

MODEL = ScriptedModel([Reply("ok")], repeat_last=True)


class _StoreWithoutClose:
    """Every operation an agent needs, but no way to be closed."""

    def __init__(self) -> None:
        self._inner = retinue.MemoryStore()

    def attach(self, session: Session) -> None:
        self._inner.attach(session)

    def attach_new(self, session: Session) -> None:
        self._inner.attach_new(session)

    async def flush(self, session: Session) -> None:
        await self._inner.flush(session)

    async def detach(self, session: Session) -> None:
        await self._inner.detach(session)

    async def load(self, session_id: str) -> Session:
        return await self._inner.load(session_id)

    async def exists(self, session_id: str) -> bool:
        return await self._inner.exists(session_id)


class _StoreWithCloseAttribute(_StoreWithoutClose):
    """``aclose`` is there, but nothing to call."""

    aclose = None


class _StoreEnteredOnly(_StoreWithoutClose):
    """An ``__aenter__`` without the ``__aexit__`` that ``async with`` needs too."""

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        return self


class _StoreWithClose(_StoreWithoutClose):
    """Closed with ``aclose()``."""

    async def aclose(self) -> None:
        await self._inner.aclose()


class _StoreAttachingAsync(_StoreWithClose):
    """``attach_new`` written ``async def``, as every other store method is."""

    async def attach_new(self, session: Session) -> None:  # type: ignore[override]
        await trio.lowlevel.checkpoint()
        self._inner.attach_new(session)


class _AsyncAttach:
    """A callable object whose ``__call__`` is async."""

    async def __call__(self, session: Session) -> None:
        await trio.lowlevel.checkpoint()


class _StoreAttachingThroughAnAsyncObject(_StoreWithClose):
    """``attach`` an object whose ``__call__`` is ``async def``."""

    attach = _AsyncAttach()  # type: ignore[assignment]


class _StoreWithoutExists(_StoreWithClose):
    """Every method but ``exists``."""

    exists = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("store", "problem"),
    [
        (_StoreWithoutClose(), "no aclose"),
        (_StoreWithCloseAttribute(), "no aclose"),
        (_StoreEnteredOnly(), "no aclose"),
        (_StoreAttachingAsync(), "attach_new is async"),
        (_StoreAttachingThroughAnAsyncObject(), "attach is async"),
        (_StoreWithoutExists(), "no method exists$"),
    ],
    ids=[
        "no-aclose",
        "aclose-not-callable",
        "aenter-without-aexit",
        "async-attach",
        "async-call-attach",
        "no-exists",
    ],
)
async def test_open_runtime_refuses_a_store_it_cannot_serve_naming_why(
    store: Any, problem: str
) -> None:
    """R13.1: a store the runtime could not close or call as it does is refused before anything
    opens, as a ConfigError naming the argument and what is wrong. Opened, it would let an
    AttributeError or TypeError naming no argument out of ``open_runtime``, or out of its close once
    the agents had run, and an ``async def attach_new`` would leave every session unstored, with a
    warning of a coroutine never awaited."""
    message = rf"^store must be None or a session store, got .*: {problem}"
    with pytest.raises(retinue.ConfigError, match=message):
        async with retinue.open_runtime(models=MODEL, store=store):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body


async def test_open_runtime_closes_a_store_by_its_aclose() -> None:
    """R13.1: a store closed with ``aclose()`` alone is served, and closed on the way out."""
    store: Any = _StoreWithClose()  # no durable or list: a store's shape is what is read
    async with retinue.open_runtime(models=MODEL, store=store) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="scripted"))
        assert (await agent.ask("hi")).reason.kind == "completed"
    with pytest.raises(retinue.StoreError):
        await store.exists("a")


async def test_a_delegating_store_wraps_a_store_closed_by_aclose_alone() -> None:
    """R13.1: ``DelegatingStore`` serves a store of one's own that has ``aclose()`` and no ``async
    with``, as the runtime does, and closes it, entering it without an AttributeError."""
    inner: Any = _StoreWithClose()
    async with retinue.open_runtime(models=MODEL, store=DelegatingStore(inner)) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="scripted"))
        assert (await agent.ask("hi")).reason.kind == "completed"
    with pytest.raises(retinue.StoreError):
        await inner.exists("a")


def _unchecked(store: object) -> Any:
    """*store*, for the type checker a store: the runtime is to find out what is wrong with it."""
    return store


class _WatchingExists(DelegatingStore):
    """Answers ``exists`` itself, never asking the store it wraps."""

    async def exists(self, session_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        return False


@pytest.mark.parametrize(
    ("store", "inner", "problem"),
    [
        (
            DelegatingStore(_unchecked(_StoreWithoutExists())),
            "_StoreWithoutExists",
            "no method exists",
        ),
        (
            DelegatingStore(_unchecked(_StoreAttachingAsync())),
            "_StoreAttachingAsync",
            "attach_new is async.*",
        ),
        (
            DelegatingStore(_unchecked(DelegatingStore(_unchecked(_StoreWithoutExists())))),
            "_StoreWithoutExists",
            "no method exists",
        ),
        (DelegatingStore(_unchecked(object())), "object", "no session store"),
        (DelegatingStore(_unchecked(_StoreWithoutClose())), "_StoreWithoutClose", "no aclose.*"),
    ],
    ids=["no-exists", "async-attach", "wrapped-twice", "no-store", "no-aclose"],
)
async def test_open_runtime_refuses_a_delegating_store_by_the_store_it_wraps(
    store: Any, inner: str, problem: str
) -> None:
    """R13.1: a ``DelegatingStore`` passes each call it does not override to the store it wraps,
    so that store is checked as one given alone, and the refusal names it. Served, a missing
    ``exists`` failed a creation with a bare AttributeError and an ``async def attach_new`` left
    every session unstored, with a warning of a coroutine never awaited."""
    message = (
        r"^store must be None or a session store, got <\S*DelegatingStore object at \w+>: "
        rf"the store it wraps, <\S*{inner} object at \w+>: {problem}$"
    )
    with pytest.raises(retinue.ConfigError, match=message):
        async with retinue.open_runtime(models=MODEL, store=store):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body


async def test_open_runtime_refuses_a_delegating_store_wrapping_none() -> None:
    """R13.1: ``None`` wrapped is refused as a store given, where the wrapper's own methods
    stood for it and its first use, the runtime's close, failed with a bare AttributeError."""
    message = (
        r"^store must be None or a session store, got <\S*DelegatingStore object at \w+>: "
        r"the store it wraps, None: no session store"
    )
    with pytest.raises(retinue.ConfigError, match=message):
        async with retinue.open_runtime(models=MODEL, store=DelegatingStore(_unchecked(None))):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body


def _wrapping_itself() -> DelegatingStore:
    outer = DelegatingStore(retinue.MemoryStore())
    outer.store = _unchecked(DelegatingStore(_unchecked(outer)))
    return outer


@pytest.mark.parametrize(
    "make", [_wrapping_itself, lambda: _self_wrapped(DelegatingStore(retinue.MemoryStore()))]
)
async def test_open_runtime_refuses_a_delegating_store_that_wraps_itself(
    make: Callable[[], DelegatingStore],
) -> None:
    """R13.1: a ``DelegatingStore`` whose wrapped stores lead back to it is refused when the runtime
    opens, where it was served and failed with RecursionError."""
    with pytest.raises(retinue.ConfigError, match=r": it wraps itself, a call passed on"):
        async with retinue.open_runtime(models=MODEL, store=make()):
            pytest.fail("the runtime opened")  # pragma: no cover - refused before the body


def _self_wrapped(store: DelegatingStore) -> DelegatingStore:
    store.store = _unchecked(store)
    return store


async def test_a_delegating_store_answering_a_call_itself_is_served_without_it() -> None:
    """R13.1: what a ``DelegatingStore`` subclass answers itself the wrapped store need not have."""
    async with retinue.open_runtime(
        models=MODEL, store=_WatchingExists(_unchecked(_StoreWithoutExists()))
    ) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="scripted"))
        assert (await agent.ask("hi")).reason.kind == "completed"
