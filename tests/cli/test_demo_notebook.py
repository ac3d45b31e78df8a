"""The demo's notebook tool keeps a count of the lines it is given, not the lines."""

from __future__ import annotations

import tracemalloc

from retinue.cli._demo_models import write_note

NOTES = 20_000


def test_the_notebook_holds_no_note_it_was_given() -> None:
    """Twenty thousand notes leave the memory in use as it was, within 200 KB: the notebook does not
    keep every line, of every run in the process (about 1.7 MB here)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for number in range(NOTES):
            write_note.fn(f"note {number} of the notebook")
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 200_000
