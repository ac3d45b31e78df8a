"""Child process of the first-write descriptor tests: many new JSONL sessions written in one
group under a lowered file limit.

Usage: ``python -m tests.stores._first_writes_child ROOT LIMIT SESSIONS CLAIMED CWDS``.
Lowers the soft ``RLIMIT_NOFILE`` to LIMIT (process-wide, hence a child),
creates SESSIONS new sessions in one ``JSONLStore`` (each claimed first, as the
runtime's agents are, if CLAIMED is 1; each at a cwd of its own if CWDS is 1),
and flushes them together: one group of first writes. Prints one JSON line:
the flush errors, the largest group, and each session's digest.
"""

from __future__ import annotations

import json
import resource
import sys

import trio

from retinue.session import Session
from retinue.stores import JSONLStore
from tests.stores._kit import flush_together, run_turn
from tests.stores._open_files_child import digest


async def main(root: str, count: int, *, claimed: bool, cwds: bool) -> dict[str, object]:
    sessions = [
        Session.create(f"s{index:04d}", cwd=f"/srv/project{index}" if cwds else None)
        for index in range(count)
    ]
    async with JSONLStore(root) as store:
        for session in sessions:
            if claimed:
                await store.claim_new(session.id)
            store.attach_new(session)
            run_turn(session, f"hello {session.id}")
        errors = await flush_together(store, sessions)
        largest_group = store.statistics().largest_group
        for session in sessions:
            await store.detach(session)
    return {
        "errors": {key: [exc.code, exc.message] for key, exc in errors.items()},
        "largest_group": largest_group,
        "digests": {session.id: digest(session) for session in sessions},
    }


if __name__ == "__main__":
    root, limit, count, claimed, cwds = sys.argv[1], *map(int, sys.argv[2:6])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    summary = trio.run(lambda: main(root, count, claimed=claimed == 1, cwds=cwds == 1))
    print(json.dumps(summary))
