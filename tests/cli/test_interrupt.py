"""Ctrl-C during ``retinue demo``: one line and exit status 130, never a traceback."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from retinue.cli import _demo, main

ARGV = ["demo", "--store", "memory", "--no-live", "--agents", "1", "--turns", "1"]

ROOT = Path(__file__).resolve().parents[2]

# Loaded by the child at startup: the import of the module named by SLOW_IMPORT says so
# on stderr, then waits for the interrupt. SIGINT raises KeyboardInterrupt, as in a
# terminal, even when the test runs where it is ignored (a background job).
SLOW_IMPORT = """
import os, signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)


class SlowImport:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == os.environ["SLOW_IMPORT"]:
            sys.stderr.write("importing\\n")
            sys.stderr.flush()
            time.sleep(60)
        return None


sys.meta_path.insert(0, SlowImport)
"""


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


def test_an_interrupted_demo_prints_the_summary_of_what_ran(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C once turns have ended: the summary of what ran still prints, marked interrupted
    (the live table's last frame shows the agents mid-turn), then the one line and status 130."""

    async def ask_then_interrupt(agent: object, _turns: int, _rng: object) -> None:
        await agent.ask("What's the weather?")  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(_demo, "_drive", ask_then_interrupt)
    argv = ["demo", "--store", "memory", "--no-live", "--provider", "scripted", "--latency", "0"]
    status = main([*argv, "--agents", "2", "--turns", "3"])
    captured = capsys.readouterr()
    assert status == 130
    assert captured.err == "retinue demo: interrupted\n"
    summary = re.findall(
        r"^summary \(interrupted\): 2 agents, (\d+) turns?, .*completed", captured.out, re.MULTILINE
    )
    assert len(summary) == 1
    assert int(summary[0]) >= 1


def test_ctrl_c_with_standard_error_closed_leaves_standard_output_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started with standard error closed (``2>&-``), an interrupted demo exits 130 and says
    nothing: the line does not go to standard output instead."""
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


def _console_script() -> str:
    """The script pip writes for the ``retinue`` entry point the project declares."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        entry = tomllib.load(file)["project"]["scripts"]["retinue"]
    module, _, name = entry.partition(":")
    return f"import re\nimport sys\nfrom {module} import {name}\nsys.exit({name}())\n"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is a POSIX signal")
@pytest.mark.parametrize("slow_module", ["retinue", "retinue.cli._demo"])
def test_ctrl_c_while_the_command_imports_exits_130_without_a_traceback(
    slow_module: str, tmp_path: Path
) -> None:
    """Ctrl-C before the command runs, while the package or the demo's modules are still importing,
    ends it as it does later: one line, status 130, no traceback of the import."""
    (tmp_path / "sitecustomize.py").write_text(SLOW_IMPORT)
    path = os.pathsep.join([str(tmp_path), str(ROOT / "src")])
    env = {**os.environ, "PYTHONPATH": path, "SLOW_IMPORT": slow_module}
    command = [sys.executable, "-c", _console_script(), "demo", "--store", "memory"]
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stderr is not None
    try:
        assert child.stderr.readline() == b"importing\n"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert (child.returncode, out, err) == (130, b"", b"retinue: interrupted\n")
