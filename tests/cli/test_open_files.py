"""``retinue demo`` under an open-file limit: raised when it can be, else refused in one line.

Each case that lowers a limit runs the command in a child process whose limit is
lowered first, so the limit of the test run itself is left alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from retinue.cli import main

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no open-file limit to lower")

UNDER_A_LIMIT = """\
import resource, sys
from retinue.cli import main
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
sys.exit(main(sys.argv[3:]))
"""

DEADLINE = 60.0
"""Far more than either case takes; a demo out of descriptors would wait 600 s per request."""


def _demo_under_limit(
    soft: int, hard: int, agents: int, cwd: Path, *provider: str
) -> subprocess.CompletedProcess[str]:
    argv = ["demo", "--no-live", "--store", "memory", "--agents", str(agents), "--turns", "1"]
    argv += [f"--provider={name}" for name in provider]
    return subprocess.run(
        [sys.executable, "-c", UNDER_A_LIMIT, str(soft), str(hard), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=DEADLINE,
        check=False,
    )


def test_demo_refuses_more_agents_than_the_hard_limit_allows_in_one_line(tmp_path: Path) -> None:
    """With both limits too low for the sockets of 150 agents, the demo starts nothing: it
    exits 1 at once with one line naming --agents and `ulimit -n`, instead of hanging."""
    finished = _demo_under_limit(soft=128, hard=128, agents=150, cwd=tmp_path)
    assert finished.returncode == 1
    assert finished.stdout == ""
    assert finished.stderr.startswith("retinue demo: --agents 150 needs about ")
    assert "ulimit -n" in finished.stderr
    # The count that fits under the limit, so the advice can be followed without root.
    fits = int(finished.stderr.split("use at most ")[1].split()[0])
    assert 0 < fits < 150
    assert _demo_under_limit(soft=128, hard=128, agents=fits, cwd=tmp_path).returncode == 0
    assert finished.stderr.count("\n") == 1


@pytest.mark.parametrize("provider", [(), ("scripted",)], ids=["mock", "scripted"])
def test_demo_under_a_limit_below_its_own_margin_advises_raising_it(
    tmp_path: Path, provider: tuple[str, ...]
) -> None:
    """Below the files the demo needs with no agent at all, no agent count fits, and the
    scripted model's agents need no file of their own: the one line advises raising the
    limit, not "use at most 0 agents", nor fails dividing by the files an agent needs."""
    finished = _demo_under_limit(40, 40, 5, tmp_path, *provider)
    assert finished.returncode == 1
    assert finished.stderr.startswith("retinue demo: --agents 5 needs about ")
    assert "use at most" not in finished.stderr
    assert "raise the limit to " in finished.stderr
    assert finished.stderr.count("\n") == 1


def test_demo_raises_a_soft_limit_that_is_too_low_and_runs(tmp_path: Path) -> None:
    """A soft limit below what 60 agents need, under a hard limit that allows it, is raised:
    every agent gets its connection and the demo completes."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard open-file limit ({hard}) leaves no room to raise the soft one")
    finished = _demo_under_limit(soft=64, hard=hard, agents=60, cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert "summary: 60 agents, " in finished.stdout
    assert "completed" in finished.stdout


def test_demo_refuses_a_count_too_large_to_ask_for_under_an_unlimited_hard_limit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under an unlimited hard limit (macOS's default), --agents past what a C long holds
    is refused in the one line, not with the traceback of setrlimit's OverflowError."""
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (1024, resource.RLIM_INFINITY))
    agents = str(10**22)
    assert main(["demo", "--no-live", "--store", "memory", "--agents", agents]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue demo: --agents {agents} needs about ")
    assert "more than the 1024 this process may open" in err
    assert err.count("\n") == 1
