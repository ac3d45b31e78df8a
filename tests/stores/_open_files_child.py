"""Child process of the open-file tests: many live JSONL sessions under a lowered file limit.

Usage: ``python -m tests.stores._open_files_child ROOT LIMIT SESSIONS``. Lowers
the soft ``RLIMIT_NOFILE`` to LIMIT (process-wide, hence a child), creates
SESSIONS new sessions in one ``JSONLStore`` and flushes them together (one
group). Then it detaches the later half of the committed sessions, flushes
the failed ones again and, while it still holds the others, tries to load
every session through a second store on the same root.
Prints one JSON summary line.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
from collections.abc import Sequence

import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from tests.stores._kit import flush_together, lines, run_turn


def digest(session: Session) -> str:
    """A fingerprint of the session's canonical event lines."""
    return hashlib.sha256("\n".join(lines(session.events)).encode()).hexdigest()


async def _second_store_claims(root: str, session_ids: Sequence[str]) -> dict[str, str]:
    """What a second store on the same root gets when it loads each session."""
    outcomes: dict[str, str] = {}
    async with JSONLStore(root) as other:
        for session_id in session_ids:
            try:
                session = await other.load(session_id)
            except StoreError as exc:
                outcomes[session_id] = exc.code or "?"
                continue
            outcomes[session_id] = "loaded"
            other.attach(session)
            await other.detach(session)
    return outcomes


async def main(root: str, count: int) -> dict[str, object]:
    sessions = [Session.create(f"s{index:04d}") for index in range(count)]
    async with JSONLStore(root) as store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session, f"hello {session.id}")
        first = await flush_together(store, sessions)
        stats = store.statistics()
        committed = [session for session in sessions if session.id not in first]
        released = committed[len(committed) // 2 :] if len(committed) > 1 else []
        for session in released:
            await store.detach(session)
        retry = await flush_together(store, [s for s in sessions if s.id in first])
        claims = await _second_store_claims(root, [session.id for session in sessions])
    return {
        "errors": {key: [exc.code, exc.message] for key, exc in first.items()},
        "largest_group": stats.largest_group,
        "buffered_after_group": stats.buffered_events,
        "retry_errors": {key: [exc.code, exc.message] for key, exc in retry.items()},
        "claims": claims,
        "released": [session.id for session in released],
        "digests": {session.id: digest(session) for session in sessions},
        "lengths": {session.id: len(session.events) for session in sessions},
    }


if __name__ == "__main__":
    root, limit, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    print(json.dumps(trio.run(main, root, count)))
