"""The benchmarks' command lines: what each refuses and what it reports, never how fast.

Each test runs a benchmark's ``main`` (or the measurement it runs) on the
smallest work that shows the behaviour; none asserts a timing.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from benchmarks import admission, http, instructions, lifecycle, overhead, requests
from retinue.providers._pools import ShardedTransport
from retinue.providers.mock import EchoPolicy, Timing, open_mock_server


@pytest.mark.parametrize(
    ("template", "count"),
    [
        *[
            (template, count)
            for template in (["{}"], ["1", "{}"], ["--one", "{}"], ["--one", "1", "{}"])
            for count in ("0", "-3", "1.5", "many")
        ],
        *[(["1", "--gc-threshold", "{}"], count) for count in ("-3", "1.5", "many")],
    ],
)
def test_overhead_refuses_a_count_below_one_before_running(
    template: list[str], count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An agent or repeat count that is not a whole number of at least 1, or a GC threshold
    that is no whole number, is refused at once."""
    with pytest.raises(SystemExit) as refused:
        overhead.main([arg.format(count) for arg in template])
    assert refused.value.code == 2
    out, err = capsys.readouterr()
    assert not out
    assert f"got {count!r}" in err


@pytest.mark.parametrize("count", ["0", "many"])
def test_instructions_refuses_an_agent_count_below_one_before_counting(
    count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No run under callgrind starts for an agent count that is not a whole number of at least 1."""
    with pytest.raises(SystemExit) as refused:
        instructions.main([count])
    assert refused.value.code == 2
    assert f"got {count!r}" in capsys.readouterr().err


def test_overhead_shows_why_a_measurement_failed_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each measurement's process writes to stderr as it runs; one that fails makes the run exit 1."""
    failing = tmp_path / "python"
    failing.write_text('#!/bin/sh\necho "no measurement of $*" >&2\nexit 3\n')
    failing.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(failing))
    assert overhead.main(["7"]) == 1
    err = capfd.readouterr().err
    assert "no measurement of -m benchmarks.overhead --one 7" in err
    assert "no measurement of -m benchmarks.overhead --growth" in err


@pytest.fixture
def gc_thresholds() -> Iterator[None]:
    """Give back the GC thresholds a benchmark's ``--gc-threshold`` set for this process."""
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("gc_thresholds")
def test_overhead_growth_line_names_its_window_and_gc_threshold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The growth line, like each N's line, says the GC threshold it was measured with."""
    assert overhead.main(["--growth", "--gc-threshold", "1234"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["benchmark"] == "overhead-growth"
    assert line["gc_threshold0"] == 1234
    assert line["window"] == 50
    assert len(line["ratios_last_to_first"]) == line["sessions"] == 5


@pytest.mark.usefixtures("gc_thresholds")
def test_overhead_takes_a_gc_threshold_of_0_which_turns_the_gc_off(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """CPython's threshold 0 disables the automatic cyclic GC, a tuning worth measuring, so it is
    taken, not refused as a count below 1."""
    assert overhead.main(["--growth", "--gc-threshold", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["gc_threshold0"] == 0


@pytest.mark.usefixtures("gc_thresholds")
def test_overhead_one_size_compares_the_same_events_with_a_floor_run_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--one N R``: both sides log the same events, each repeat gives its own ratio, and the
    floor ran in processes of its own, where the runtime was never imported."""
    assert overhead.main(["--one", "2", "2", "--gc-threshold", "900"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["events"] == line["floor_events"] == 2 * 216
    assert len(line["ratios_to_floor"]) == line["repeats"] == 2
    assert line["gc_threshold0"] == 900
    assert line["floor_cpu_us_per_step"] > 0 < line["cpu_us_per_step"]


def test_the_floor_runs_without_importing_the_runtime() -> None:
    """``python -m benchmarks.floor N`` prints its timed run and its first run's RSS; its
    process never imports retinue, whose objects its collections would walk."""
    probe = (
        "import runpy, sys; sys.argv = ['floor', '3']; "
        "runpy.run_module('benchmarks.floor', run_name='__main__', alter_sys=True)"
    )
    script = f"import atexit, sys; atexit.register(lambda: print(any(m.startswith('retinue') for m in sys.modules))); {probe}"
    out = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    timed, imported = out.stdout.splitlines()
    events, cpu_s, wall_s, gc_s, rss = json.loads(timed)
    assert (events, imported) == (3 * 216, "False")
    assert min(cpu_s, wall_s, rss) > 0 <= gc_s


def test_requests_refuses_a_session_too_short_for_two_windows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A session whose first and last windows of requests would overlap is refused, not reported as no growth."""
    with pytest.raises(SystemExit) as refused:
        requests.main(["10"])
    assert refused.value.code == 2
    out, err = capsys.readouterr()
    assert not out
    assert "T must be at least 100" in err


def test_requests_answers_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` prints the usage, as every other benchmark's does."""
    with pytest.raises(SystemExit) as done:
        requests.main(["--help"])
    assert done.value.code == 0
    assert "usage: python -m benchmarks.requests" in capsys.readouterr().out


def test_lifecycle_of_one_size_prints_no_growth_line(capsys: pytest.CaptureFixture[str]) -> None:
    """With one N there is nothing to compare it with: no growth line of ratios 1.0 is printed."""
    lifecycle.main(["3", "3", "--repeats", "1"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["benchmark"] for line in lines] == ["lifecycle"]
    assert lines[0]["agents"] == 3


def test_lifecycle_compares_the_largest_size_with_the_smallest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Given several N, the last line holds each phase's ratio of the largest to the smallest."""
    lifecycle.main(["4", "2", "3", "--repeats", "1"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["agents"] for line in lines] == [2, 3, 4, [2, 4]]
    assert lines[-1]["benchmark"] == "lifecycle-growth"
    assert len(lines[-1]["turn_ratios_without_gc"]) == 1


def test_admission_line_gives_the_wall_time_its_rate_is_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A mode's line gives the wall time its turns a second are over: turns started, then drained."""
    admission.main(["--agents", "2", "--seconds", "0.2", "--modes", "off"])
    [line] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert line["mode"] == "off"
    assert line["wall_s"] >= 0.2
    assert set(line["ended"]) == {"completed"}


def test_admission_line_gives_the_cpu_its_thread_spent(capsys: pytest.CaptureFixture[str]) -> None:
    """A mode's line gives its thread's CPU seconds beside the wall time: a CPU-bound run shows."""
    admission.main(["--agents", "2", "--seconds", "0.2", "--modes", "fixed"])
    [line] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert line["cpu_s"] > 0


async def test_http_measures_every_client_with_the_pool_size_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--pool-size`` sizes the floor's pools and the adapters' alike, and the line names it."""
    policy = EchoPolicy(chunks=4, max_tool_calls=0)
    with trio.fail_after(60):
        async with open_mock_server(policy, timing=Timing(latency=0.0)) as server:
            await http.bench(server.base_url, 3, 1, 4, 0.0, 1, pool_size=1)
    line = json.loads(capsys.readouterr().out)
    assert line["pool_size"] == 1
    assert [(run["client"], run["steps"]) for run in line["results"]] == [
        ("raw-httpx2", 3),
        ("openai", 3),
        ("anthropic", 3),
    ]


async def test_http_gives_the_floor_a_connection_per_agent_as_the_adapters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three agents in pools of two get three connections, not the four of two full pools, so the
    floor has no more connections than the adapters it is compared with."""
    built: list[ShardedTransport] = []

    def recorded(*args: Any, **kwargs: Any) -> ShardedTransport:
        built.append(ShardedTransport(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(http, "ShardedTransport", recorded)
    policy = EchoPolicy(chunks=4, max_tool_calls=0)
    with trio.fail_after(60):
        async with open_mock_server(policy, timing=Timing(latency=0.0)) as server:
            await http.bench(server.base_url, 3, 1, 4, 0.0, 1, pool_size=2)
    assert [(pools.shards, pools.max_connections) for pools in built] == [(2, 3)]


@pytest.mark.parametrize("option", ["--agents", "--steps", "--chunks", "--repeats", "--pool-size"])
def test_http_refuses_a_count_below_one_before_starting_its_server(
    option: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A count of 0 is a usage error naming the option, not a ZeroDivisionError once the server runs
    (``--pool-size 0``, or 0 steps), nor an IndexError (0 repeats)."""
    monkeypatch.setattr(sys, "argv", ["benchmarks.http", option, "0"])
    with pytest.raises(SystemExit) as refused:
        http.main()
    assert refused.value.code == 2
    assert f"argument {option}: must be a whole number of at least 1, got '0'" in (
        capsys.readouterr().err
    )


def test_requests_gives_the_memory_an_adapter_keeps_beside_a_history() -> None:
    """A line gives what the adapter keeps beside the history, as a share of its messages' memory."""
    line = requests.measure("anthropic", "one-turn", 100)
    assert line["requests"] == 101
    kept = line["kept_over_messages"]
    assert isinstance(kept, float)
    assert kept > 0
