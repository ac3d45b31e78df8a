"""Running a program of agents streaming from the mock server until a real Ctrl-C ends it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Appended to a program whose main(agents) fills agents and streams until Ctrl-C: it prints
# what trio.run raised, then the kinds the agents' last turns ended with.
REPORT = """
agents = []
try:
    trio.run(main, agents)
except BaseException as exc:
    print("raised", type(exc).__name__, exc.split(KeyboardInterrupt)[0] is not None
          if isinstance(exc, BaseExceptionGroup) else isinstance(exc, KeyboardInterrupt))
ends = set()
for agent in agents:
    reasons = [event.data.reason for event in agent.session.events if event.type == "turn/end"]
    ends |= {reason.kind if reason.code is None else f"{reason.kind} {reason.code}"
             for reason in reasons[-1:]}
print(sorted(ends))
"""


def assert_every_turn_in_flight_disposed(program: str) -> None:
    """Run *program* (with :data:`REPORT` appended) in a child: it must end by Ctrl-C, its
    agents' last turns ``disposed``, or ``completed`` for one between two asks, none as a
    stream the server cut."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", program + REPORT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_reported_disposed(done.stdout, done.stderr)


def assert_reported_disposed(stdout: str, stderr: str) -> None:
    """What a program's :data:`REPORT` printed: ended by Ctrl-C, every agent's last turn
    ``disposed`` or ``completed``, at least one ``disposed``."""
    raised, *ends = stdout.splitlines() or [""]
    assert ends, stdout + stderr
    assert set(ast.literal_eval(ends[0])) <= {"completed", "disposed"}, stdout
    assert "disposed" in ends[0], stdout
    assert raised in {"raised KeyboardInterrupt True", "raised BaseExceptionGroup True"}, (
        stdout + stderr
    )
