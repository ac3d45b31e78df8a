"""A session of finished turns, the lines a JSONL store loads, and a descriptor table filled,
for the JSONL file tests."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.testing import check_session_invariants
from tests.stores._kit import lines, run_turn


def session_of(session_id: str, turns: int, cwd: str | None = None) -> Session:
    """A new session *session_id* (at *cwd*) holding *turns* finished turns."""
    session = Session.create(session_id, cwd=cwd)
    for index in range(turns):
        run_turn(session, f"turn {index}")
    return session


async def load_lines(root: Path, session_id: str) -> list[str]:
    """The lines of *session_id* loaded from the JSONL store at *root*, its invariants checked."""
    async with JSONLStore(root) as store:
        loaded = await store.load(session_id)
    check_session_invariants(loaded.events)
    return lines(loaded.events)


@contextlib.contextmanager
def descriptors_filled(spare: int = 0) -> Iterator[None]:
    """Fill the descriptor table up to a lowered limit but for *spare* slots; emptied, and the
    limit restored, after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    held: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(highest + 32, soft), hard))
    try:
        with contextlib.suppress(OSError):
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        for _ in range(spare):
            os.close(held.pop())
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
