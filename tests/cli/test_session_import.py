"""``retinue sessions import`` stores only a log that keeps the invariants of SPEC 4.4."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import trio

from retinue.cli import main
from retinue.cli._sessions import to_jsonl
from retinue.session import Session, SessionHeader, load_header
from retinue.stores import JSONLStore
from tests.stores._kit import open_tool_turn, run_turn


def _exported(tmp_path: Path) -> list[dict[str, object]]:
    """The JSONL records of a session with a finished turn, then one cut short mid-step."""
    session = Session.create("s1")
    run_turn(session, "what is the weather?")
    open_tool_turn(session)
    return [json.loads(line) for line in to_jsonl(session).splitlines()]


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _stored(store: Path) -> list[str]:
    async def listed() -> list[str]:
        async with JSONLStore(store) as opened:
            return [header.id for header in await opened.list()]

    return trio.run(listed) if store.exists() else []


def _first(records: list[dict[str, object]], kind: str) -> int:
    return next(index for index, record in enumerate(records) if record.get("type") == kind)


def _answer_another_call(records: list[dict[str, object]]) -> int:
    line = _first(records, "tool/result")
    data = records[line]["data"]
    assert isinstance(data, dict)
    data["call_id"] = "no-such-call"
    return line


def _move_a_step_to_another_turn(records: list[dict[str, object]]) -> int:
    line = _first(records, "step/start")
    data = records[line]["data"]
    assert isinstance(data, dict)
    data["turn"] = 7
    return line


@pytest.mark.parametrize(
    ("break_it", "problem"),
    [
        # Found by the invariant checker, which names the rule.
        (_answer_another_call, "seq {seq} (tool/result): R4.15"),
        # Refused by the session itself as the log is rebuilt (R4.14).
        (
            _move_a_step_to_another_turn,
            "event seq {seq} (step/start): step/start of turn 7 inside turn 1",
        ),
    ],
    ids=["result-of-no-call", "step-of-another-turn"],
)
def test_import_refuses_a_log_that_breaks_an_invariant_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], break_it: object, problem: str
) -> None:
    """R4.14, R4.15: a log whose event breaks an invariant is refused, the line of that event named,
    and nothing is stored: stored, it would be found broken only by ``replay``, and resumed, its
    history would be no valid transcript."""
    records = _exported(tmp_path)
    assert callable(break_it)
    line = break_it(records) + 1  # records[0] is the header, on line 1
    source = _write(tmp_path / "broken.jsonl", records)
    store = tmp_path / "store"
    assert main(["sessions", "--store", f"jsonl:{store}", "import", str(source)]) == 1
    err = capsys.readouterr().err
    expected = problem.format(seq=line - 2)
    assert err.startswith(f"retinue sessions import: {source}, line {line}: {expected}")
    assert _stored(store) == []


def test_import_takes_a_log_cut_short_mid_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R4.13: a log that ends inside a turn, a tool call unanswered (a crash), is no broken
    one: it is imported, and loading it closes the turn."""
    source = _write(tmp_path / "crashed.jsonl", _exported(tmp_path))
    store = tmp_path / "store"
    assert main(["sessions", "--store", f"jsonl:{store}", "import", str(source)]) == 0
    assert capsys.readouterr().out.startswith("imported s1 (")
    assert _stored(store) == ["s1"]


def test_a_header_naming_a_seed_longer_than_the_log_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R4.25: a fork's seed_length counts the events it was seeded with, the start of its log; a
    header naming more than the file holds is refused, naming its line, and nothing is stored (nor
    listed as ``seed=99999``)."""
    records = _exported(tmp_path)
    records[0] |= {"parent_session": "s0", "seed_length": 99_999}
    exported = _write(tmp_path / "s1.jsonl", records)
    store = tmp_path / "store"
    assert main(["sessions", "import", str(exported), "--store", f"jsonl:{store}"]) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions import: {exported}, line 1: the header's seed_length 99999 "
        f"is more than the {len(records) - 1} events that follow it\n"
    )
    assert _stored(store) == []


def test_a_seed_one_event_longer_than_the_log_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R4.25: a seed_length of one event more than the file holds is refused as any longer
    one, and nothing is stored; a seed as long as the log is a fork with no events of its own."""
    records = _exported(tmp_path)
    events = len(records) - 1
    records[0] |= {"parent_session": "s0", "seed_length": events + 1}
    exported = _write(tmp_path / "s1.jsonl", records)
    store = tmp_path / "store"
    assert main(["sessions", "import", str(exported), "--store", f"jsonl:{store}"]) == 1
    assert capsys.readouterr().err == (
        f"retinue sessions import: {exported}, line 1: the header's seed_length {events + 1} "
        f"is more than the {events} events that follow it\n"
    )
    assert _stored(store) == []
    records[0] |= {"seed_length": events}
    _write(exported, records)
    assert main(["sessions", "import", str(exported), "--store", f"jsonl:{store}"]) == 0
    assert _stored(store) == ["s1"]


def test_import_under_another_id_keeps_the_rest_of_the_header(tmp_path: Path) -> None:
    """R11.13, R4.25: a log imported under another id (``--id``) is stored under that id alone:
    its creation time, cwd, and the fork it is (its parent and seed) stay as exported."""
    records = _exported(tmp_path)
    records[0] |= {"parent_session": "s0", "seed_length": 3, "cwd": "/work/project"}
    exported = _write(tmp_path / "s1.jsonl", records)
    store = tmp_path / "store"
    assert (
        main(["sessions", "import", str(exported), "--id", "s2", "--store", f"jsonl:{store}"]) == 0
    )

    async def header_of(session_id: str) -> SessionHeader:
        async with JSONLStore(store) as opened:
            return (await opened.load(session_id)).header

    header = trio.run(header_of, "s2")
    assert header == attrs.evolve(load_header(records[0]), id="s2")
