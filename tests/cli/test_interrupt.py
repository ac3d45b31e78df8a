"""Ctrl-C during ``retinue demo``: one line and exit status 130, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable

import pytest
import trio

from retinue.cli import _demo, main

ARGV = ["demo", "--store", "memory", "--no-live", "--agents", "1", "--turns", "1"]


async def _in_main_task(_args: argparse.Namespace) -> int:
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


async def _in_a_nursery(_args: argparse.Namespace) -> int:
    """As trio delivers Ctrl-C to a task of the demo's nurseries: inside an exception group."""

    async def interrupted() -> None:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupted)
    return 0


async def _beside_a_failure(_args: argparse.Namespace) -> int:
    """Ctrl-C that cancels a task whose cleanup then fails: both are in the group."""

    async def failing_cleanup() -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            raise ValueError("a cleanup failed") from None

    async with trio.open_nursery() as nursery:
        nursery.start_soon(failing_cleanup)
        await trio.lowlevel.checkpoint()
        nursery.start_soon(_in_main_task, _args)
    return 0


@pytest.mark.parametrize(
    "run_demo",
    [_in_main_task, _in_a_nursery, _beside_a_failure],
    ids=["main-task", "nursery", "nursery-with-a-failure"],
)
def test_ctrl_c_during_the_demo_prints_one_line_and_exits_130(
    run_demo: Callable[[argparse.Namespace], Awaitable[int]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A KeyboardInterrupt, bare or inside a nursery's exception group, ends the command
    with status 130 (128 + SIGINT) and one line on stderr."""
    monkeypatch.setattr(_demo, "run_demo", run_demo)
    try:
        status = main(ARGV)
    except BaseException as escaped:  # an escaped interrupt would end the whole test run
        pytest.fail(f"the interrupt escaped: {escaped!r}")
    err = capsys.readouterr().err
    assert status == 130
    assert err == "retinue demo: interrupted\n"


def test_ctrl_c_with_standard_error_closed_leaves_standard_output_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started with standard error closed (``2>&-``), an interrupted demo exits 130 and
    says nothing: the line went to standard output instead."""
    monkeypatch.setattr(_demo, "run_demo", _in_main_task)
    monkeypatch.setattr(sys, "stderr", None)
    assert main(ARGV) == 130
    assert capsys.readouterr().out == ""


def test_an_exception_group_without_ctrl_c_is_not_called_an_interrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only an interrupt is reported as one: a group of other base exceptions propagates."""

    async def exits(_args: argparse.Namespace) -> int:
        async def leave() -> None:
            await trio.lowlevel.checkpoint()
            raise SystemExit(3)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(leave)
        return 0

    monkeypatch.setattr(_demo, "run_demo", exits)
    with pytest.raises(BaseExceptionGroup) as caught:
        main(ARGV)
    assert caught.value.subgroup(SystemExit) is not None
