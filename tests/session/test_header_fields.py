"""A session header holds only what its stored line loads back as: exact types (R4.1, R4.3, R4.25).

A bool or float where an integer belongs, or bytes or a path where a string does,
would be written as a line no store loads again, or fail every write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from retinue import AgentOptions
from retinue._errors import ConfigError, CorruptSessionError, SessionError
from retinue.session import (
    Session,
    SessionHeader,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    dump_header,
    load_header,
)
from retinue.stores._common import parse_header
from retinue.testing import Reply, ScriptedModel
from tests.helpers import runtime

BIG = 10**5000  # more digits than JSON may write by default

BAD_FIELDS = [
    ("id", 7),
    ("id", None),
    ("id", b"s"),
    ("created_at", True),
    ("created_at", 1.5),
    ("created_at", "1"),
    ("created_at", BIG),
    ("version", False),
    ("version", 0.0),
    ("cwd", b"/tmp"),
    ("cwd", Path("/tmp")),
    ("parent_session", 3),
    ("seed_length", True),
    ("seed_length", 2.0),
    ("seed_length", BIG),
]


def _ids(case: Any) -> str:
    return "big" if case is BIG else repr(case)


def _loaded(header: SessionHeader) -> SessionHeader:
    """The header as a store writes its line and loads it back."""
    return load_header(json.loads(json.dumps(dump_header(header))))


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS, ids=_ids)
def test_a_header_field_no_store_could_load_back_is_refused_naming_it(
    field: str, value: Any
) -> None:
    """R4.1: the type check is the one the stored line is read with."""
    fields: dict[str, Any] = {"id": "s", "created_at": 1, field: value}
    with pytest.raises(SessionError) as caught:
        SessionHeader(**fields)
    assert caught.value.code == "INVALID_HEADER"
    assert str(caught.value).startswith(f"session header {field} must be ")
    if value is BIG:
        assert "an integer of 16610 bits" in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("cwd", "relative/dir", "cwd must be an absolute path, got 'relative/dir'"),
        ("cwd", "", "cwd must be an absolute path, got ''"),
        ("seed_length", -1, "seed_length must be a count of events, got -1"),
        ("created_at", 2**63, f"created_at must be a signed 64-bit integer, got {2**63}"),
        (
            "created_at",
            -(2**63) - 1,
            f"created_at must be a signed 64-bit integer, got {-(2**63) - 1}",
        ),
    ],
)
def test_a_header_field_out_of_its_range_is_refused_built_or_loaded(
    field: str, value: Any, problem: str
) -> None:
    """R4.3, R4.25, R11.14: a relative cwd names another directory from each process that
    reads it, a seed is a count of events, and a creation time beyond 64 bits fits a JSONL
    line but no SQLite or PostgreSQL column; each is refused when built, and a stored line
    holding any is corrupt."""
    with pytest.raises(SessionError) as caught:
        SessionHeader(**{"id": "s", "created_at": 1, field: value})
    assert caught.value.code == "INVALID_HEADER"
    assert str(caught.value) == f"session header {problem}"
    with pytest.raises(CorruptSessionError) as loaded:
        load_header({"type": "session", "id": "s", "created_at": 1, "version": 0, field: value})
    assert str(loaded.value) == f"session header is malformed: session header {problem} @ $"


@pytest.mark.parametrize(
    "fields",
    [
        {"created_at": -(10**15)},
        {"created_at": -(2**63)},
        {"created_at": 2**63 - 1},
        {"version": 7},
        {"cwd": "/tmp", "parent_session": "p", "seed_length": 0},
        {"cwd": "C:\\work"},
        {"cwd": "\\\\server\\share"},
        {"cwd": None, "parent_session": None, "seed_length": None},
    ],
    ids=[
        "negative",
        "int64-min",
        "int64-max",
        "other-version",
        "every-field",
        "windows-cwd",
        "unc-cwd",
        "every-none",
    ],
)
def test_a_header_of_exact_types_is_accepted_and_loads_back_equal(fields: dict[str, Any]) -> None:
    """R4.1, R4.3: whatever the loader reads is accepted (the version is judged on load),
    a cwd absolute on another system too: a store or an export may cross systems."""
    header = SessionHeader(id="s", **{"created_at": 1, **fields})
    assert _loaded(header) == header


@pytest.mark.parametrize("extra", [{"colour": "red"}, {"parent_sesion": "p"}], ids=repr)
def test_a_header_line_with_a_key_no_field_holds_is_refused_not_dropped(
    extra: dict[str, Any],
) -> None:
    """R4.3, R11.2: a header line of this format version naming a field it does not have
    (a newer writer's, or a misspelled one) is refused like such an event record, never
    loaded without it; a line of another version loads, for its version to be refused."""
    line = {"type": "session", "id": "s", "created_at": 1, "version": 0, **extra}
    with pytest.raises(CorruptSessionError) as caught:
        load_header(line)
    assert caught.value.code == "UNKNOWN_FIELD"
    assert (
        str(caught.value)
        == f"session header is malformed: extra fields found ({next(iter(extra))}) @ $"
    )
    assert load_header({**line, "version": 7}).version == 7


@pytest.mark.parametrize(
    ("option", "value"),
    [("session_id", 7), ("created_at", True), ("created_at", 1.5)],
    ids=_ids,
)
def test_create_refuses_a_header_value_no_store_could_load_back(option: str, value: Any) -> None:
    """R4.1: refused when the session is built, not when its first write fails."""
    arguments: dict[str, Any] = {"session_id": "s", option: value}
    with pytest.raises(SessionError) as caught:
        Session.create(**arguments)
    assert caught.value.code == "INVALID_HEADER"


@pytest.mark.parametrize("cwd", [b"/tmp", Path("/tmp"), 7, "relative"], ids=repr)
def test_create_refuses_a_cwd_that_is_not_an_absolute_path_str(cwd: Any) -> None:
    """R4.3: not a bare TypeError from the path check, nor bytes the header cannot hold."""
    with pytest.raises(SessionError) as caught:
        Session.create("s", cwd=cwd)
    assert caught.value.code == "INVALID_CWD"
    assert repr(cwd) in str(caught.value)


def test_fork_refuses_a_child_id_that_is_not_a_str() -> None:
    """R4.25: the child's header would be stored without an id."""
    source = Session.create("src")
    source.append(TurnStart(1, TurnTrigger("message")))
    source.append(TurnEnd(1, TurnEndReason.completed()))
    with pytest.raises(SessionError) as caught:
        source.fork(None)  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_HEADER"
    assert "session header id must be a str, got None" in str(caught.value)


async def test_create_agent_with_a_bytes_cwd_is_refused_and_leaves_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.23: a relative or non-str cwd is an error at creation; the runtime closes clean."""
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        with pytest.raises(
            ConfigError, match=r"^cwd must be an absolute path as a str, got b'/tmp'$"
        ):
            await rt.create_agent("w", AgentOptions(model="scripted"), cwd=b"/tmp")  # type: ignore[arg-type]
        assert len(rt.agents) == 0
        agent = await rt.create_agent("w", AgentOptions(model="scripted"), cwd="/tmp")
        assert (await agent.ask("hello")).reason.kind == "completed"


def test_a_header_line_without_its_version_is_refused() -> None:
    """R11.13, R11.10: every header is written with its format version; one without it
    is corrupt, not read as this version (the field's default)."""
    with pytest.raises(CorruptSessionError) as caught:
        load_header({"type": "session", "id": "s", "created_at": 1})
    assert str(caught.value) == "session header is malformed: $.version is missing"
    with pytest.raises(CorruptSessionError) as parsed:
        parse_header(b'{"type":"session","id":"s","created_at":1}', "s")
    assert parsed.value.code == "CORRUPT_HEADER"
    assert "s" in str(parsed.value)
