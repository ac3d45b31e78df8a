"""ScriptedModel steps that raise mid-stream (R10.3): the given error first, then on each replay a
fresh copy keeping its type, args, attributes and notes, or the error itself when it cannot be
created again."""

from __future__ import annotations

import traceback
from typing import Self

import pytest

from retinue._errors import ModelError
from retinue._stream import BlockStart, StreamChunk, TextDelta
from retinue.testing import RaiseMidStream, ScriptedModel
from tests.unit._scripted_model_kit import play, request


async def test_scripted_model_raise_mid_stream_yields_then_raises_the_error() -> None:
    """R10.3: a stream may raise after some chunks; the exact error propagates."""
    boom = ConnectionError("reset")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=3, text="abcd", chunks=4)])
    seen: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in model.stream(request()):
            seen.append(chunk)

    with pytest.raises(ConnectionError) as caught:
        await consume()
    assert caught.value is boom
    assert seen == [BlockStart(0, "text"), TextDelta(0, "a"), TextDelta(0, "b")]


async def test_scripted_model_raise_mid_stream_raises_a_fresh_copy_on_each_replay() -> None:
    """R10.3: a replayed raising step raises a fresh copy (same type, args, attributes, notes).

    The first play raises the given instance; later plays never share one
    error between streams or agents, so its traceback does not grow per play.
    """
    boom = ModelError("reset", code="RESET")
    boom.add_note("scripted")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=1)], repeat_last=True)
    raised: list[BaseException] = []
    for _ in range(3):
        with pytest.raises(ModelError) as caught:
            await play(model)
        raised.append(caught.value)
    assert raised[0] is boom
    assert len({id(error) for error in raised}) == 3
    for error in raised:
        assert type(error) is ModelError
        assert (error.args, error.code, error.__notes__) == (("reset",), "RESET", ["scripted"])
    depths = [len(traceback.extract_tb(error.__traceback__)) for error in raised]
    assert depths == [depths[0]] * 3
    raised[1].add_note("only on the copy")
    assert boom.__notes__ == ["scripted"]


def test_scripted_model_raise_mid_stream_rejects_more_chunks_than_the_text_has() -> None:
    """``after_chunks`` beyond the reply's chunk count is refused at construction."""
    with pytest.raises(ValueError, match="after_chunks"):
        RaiseMidStream(RuntimeError("x"), after_chunks=4, text="ab", chunks=1)


class _StatusError(Exception):
    """An error its args alone cannot rebuild, shaped like the SDK errors (keyword-only fields)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


async def test_scripted_model_replays_an_error_its_args_cannot_rebuild_as_fresh_copies() -> None:
    """R10.3: each replay raises a fresh copy with the type, args, attributes and notes kept.

    Such an error's ``__init__`` wants more than its args, so the copy is built
    without it; agents sharing the step never share one error object.
    """
    boom = _StatusError("unavailable", status=503)
    boom.add_note("scripted")
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    raised: list[_StatusError] = []
    for _ in range(3):
        with pytest.raises(_StatusError) as caught:
            await play(model)
        raised.append(caught.value)
    assert raised[0] is boom
    assert len({id(error) for error in raised}) == 3
    for error in raised:
        assert type(error) is _StatusError
        assert (error.args, error.status, error.__notes__) == (("unavailable",), 503, ["scripted"])
    depths = [len(traceback.extract_tb(error.__traceback__)) for error in raised]
    assert depths == [depths[0]] * 3
    raised[1].add_note("only on the copy")
    assert boom.__notes__ == ["scripted"]


class _ErrnoError(OSError):
    """An ``OSError`` with its own ``__init__``: the built-in fields come from the args."""

    def __init__(self, code: int, message: str, *, host: str) -> None:
        super().__init__(code, message)
        self.host = host


async def test_scripted_model_replayed_copies_keep_the_fields_a_builtin_base_sets() -> None:
    """A copy made without the error's ``__init__`` still has ``errno`` and ``strerror``."""
    boom = _ErrnoError(104, "reset", host="api")
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    with pytest.raises(_ErrnoError):
        await play(model)
    with pytest.raises(_ErrnoError) as caught:
        await play(model)
    copy = caught.value
    assert copy is not boom
    assert (copy.errno, copy.strerror, copy.args) == (104, "reset", (104, "reset"))
    assert copy.host == "api"


class _SlottedError(Exception):
    """An error keeping a field in ``__slots__``, outside its instance ``__dict__``."""

    __slots__ = ("status",)

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


async def test_scripted_model_replayed_copies_keep_slotted_fields() -> None:
    """A copy made without the error's ``__init__`` keeps the fields its ``__slots__`` hold."""
    boom = _SlottedError("unavailable", status=503)
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    with pytest.raises(_SlottedError):
        await play(model)
    with pytest.raises(_SlottedError) as caught:
        await play(model)
    assert caught.value is not boom
    assert (caught.value.args, caught.value.status) == (("unavailable",), 503)


class _UncreatableError(Exception):
    """An error built in ``__new__``, which refuses its args alone (it wants ``status`` too)."""

    status: int

    def __new__(cls, message: str, *, status: int) -> Self:
        error = super().__new__(cls, message)
        error.status = status
        return error

    def __init__(self, message: str, **_fields: object) -> None:
        super().__init__(message)


async def test_scripted_model_replays_an_uncreatable_error_as_itself() -> None:
    """Only an error that cannot be created again is raised again as itself, traceback cleared."""
    boom = _UncreatableError("unavailable", status=503)
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    depths = []
    for _ in range(3):
        with pytest.raises(_UncreatableError) as caught:
            await play(model)
        assert caught.value is boom
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths == [depths[0]] * 3
