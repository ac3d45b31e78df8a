"""Errors name a listener by what tells it from another of the same code (R6.3, R6.4)."""

from __future__ import annotations

import functools

import attrs
import pytest
import trio

from retinue._errors import HookError
from retinue.hooks import HookBus


@attrs.define
class Backup:
    """A callable object whose class has a repr of its own, as an attrs class does."""

    target: str

    async def __call__(self, agent: object, session: object) -> None:
        await trio.lowlevel.checkpoint()
        if self.target == "s3":
            raise OSError("unreachable")

    def check(self, *_args: object) -> object:
        return "deny it"


class Plain:
    """A callable object with no repr of its own: its address tells nothing apart."""

    def __call__(self, *_args: object) -> object:
        return "deny it"


def _check(mode: object, *_args: object, **_keywords: object) -> object:
    return "deny it"


async def _refusal(listener: object) -> str:
    bus = HookBus()
    bus.on("tools/pre-execute", listener)  # type: ignore[arg-type]
    with pytest.raises(HookError) as raised:
        await bus.waterfall_value("tools/pre-execute", None, "execution")
    return str(raised.value)


async def test_two_callable_objects_of_one_class_are_told_apart_by_their_repr() -> None:
    """R6.4: the note on a flush listener's failure shows the object's own repr after its
    qualified name, where both Backup objects were named ``Backup.__call__`` alike."""
    bus = HookBus()
    bus.on("session/flush", Backup("disk"))
    bus.on("session/flush", Backup("s3"))
    with pytest.raises(OSError, match="unreachable") as raised:
        await bus.parallel("session/flush", "agent", "session")
    assert raised.value.__notes__ == [
        f"raised by a session/flush listener ({__name__}.Backup.__call__ of Backup(target='s3'))"
    ]


@pytest.mark.parametrize(
    ("listener", "shown"),
    [
        (Backup("s3").check, f"{__name__}.Backup.check of Backup(target='s3')"),
        (functools.partial(_check, "strict"), f"{__name__}._check with 'strict'"),
        (
            functools.partial(functools.partial(_check, "strict"), 1, key="k"),
            f"{__name__}._check with 'strict', 1, key='k'",
        ),
        (functools.partial(_check, Plain(), "x"), f"{__name__}._check with 'x'"),
        (Plain(), f"{__name__}.Plain.__call__"),
        (_check, f"{__name__}._check"),
    ],
    ids=[
        "bound method",
        "partial",
        "nested partial",
        "argument without repr",
        "object without repr",
        "function",
    ],
)
async def test_an_invalid_result_names_the_listener_with_what_tells_it_apart(
    listener: object, shown: str
) -> None:
    """R6.3: a bound instance's repr, or a partial's arguments, follow the qualified name,
    where the error named only the code, which two listeners may share; an object whose
    class has no repr of its own, or such an argument, shows none (an address says nothing)."""
    message = await _refusal(listener)
    assert f"a tools/pre-execute listener ({shown}) returned 'deny it'" in message


class _Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def check(self, *_args: object) -> object:
        return "deny it"


async def test_a_repr_that_fails_leaves_the_qualified_name() -> None:
    """R6.3: a repr that raises must not take the place of the error that names the listener."""
    message = await _refusal(_Unshowable().check)
    assert f"({__name__}._Unshowable.check) returned 'deny it'" in message
