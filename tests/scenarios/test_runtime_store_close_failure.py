"""The runtime's exit closes its store without letting a failed close replace the body's error.

Whether the store is closed by its ``async with`` exit or by ``aclose()``, a
failure to close while the body's error propagates is logged, and the body's
error (Ctrl-C too) comes out as raised; with no error propagating, the close's
failure is raised (R12.10).
"""

from __future__ import annotations

import logging
from types import TracebackType

import pytest
import trio
import trio.testing

import retinue
from retinue import StoreError
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import raises_ctrl_c


class BodyError(Exception):
    """The error the runtime's body raises."""


class ExitFailingStore(DelegatingStore):
    """A store closed by its ``async with`` exit, which fails once it has closed."""

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.store.__aexit__(kind, value, tb)
        raise StoreError("the disk went away while closing", code="STORAGE_ERROR")


def model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")])


async def test_a_failed_store_exit_is_logged_not_raised_over_the_body_error(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.10: the body's error comes out, the store's failure to close is logged, for a store
    closed by its exit as for one closed by ``aclose()``: the failure is not raised in place of the
    body's error."""
    with trio.fail_after(60), pytest.raises(BodyError, match=r"^the body's$"):
        async with retinue.open_runtime(models=model(), store=ExitFailingStore(MemoryStore())):
            raise BodyError("the body's")
    failures = [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info]
    assert [r.getMessage() for r in failures] == [
        "closing the store failed while an error was propagating"
    ]
    assert failures[0].exc_info is not None
    assert isinstance(failures[0].exc_info[1], StoreError)


async def test_a_failed_store_exit_leaves_ctrl_c_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: Ctrl-C in the body comes out as the KeyboardInterrupt it is, however the store's
    close fails, not as the store's ``StoreError``."""
    with trio.fail_after(60), raises_ctrl_c():
        async with retinue.open_runtime(models=model(), store=ExitFailingStore(MemoryStore())):
            raise KeyboardInterrupt


async def test_a_failed_store_exit_is_raised_when_the_body_ended_well(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: with nothing propagating, the store's failure to close is the runtime's error."""
    with trio.fail_after(60), pytest.raises(StoreError, match="while closing"):
        async with retinue.open_runtime(models=model(), store=ExitFailingStore(MemoryStore())):
            pass
