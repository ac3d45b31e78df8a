"""Loop configuration: loading, validation, identity overrides and the editable cap (SPEC 13)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import retinue
from retinue.config import (
    AgentEntry,
    Identity,
    LoopConfig,
    ParallelCapSetting,
    load_config,
    parse_config,
    with_overrides,
)
from retinue.stores import check_session_id
from retinue.testing import ScriptedModel
from tests.helpers import runtime

EXAMPLE = """
max_parallel_tool_calls = 4

[[agents]]
id = "writer"
provider = "openai"
model = "gpt-4.1-mini"
max_tokens = 2048
cwd = "/srv/project"

[[agents]]
id = "reviewer"
session_id = "reviewer-main"

[[agents]]
id = "archivist"
resume_session_id = "archive-1"
"""


def write(tmp_path: Path, text: str) -> Path:
    """Write *text* as ``retinue.toml`` under *tmp_path*."""
    path = tmp_path / "retinue.toml"
    path.write_text(text)
    return path


def test_load_config_builds_frozen_values_from_snake_case_toml(tmp_path: Path) -> None:
    """R13.1: the cap and every agent key are read from snake_case TOML keys."""
    config = load_config(write(tmp_path, EXAMPLE))
    assert config == LoopConfig(
        max_parallel_tool_calls=4,
        agents=(
            AgentEntry(
                "writer",
                provider="openai",
                model="gpt-4.1-mini",
                max_tokens=2048,
                cwd="/srv/project",
            ),
            AgentEntry("reviewer", session_id="reviewer-main"),
            AgentEntry("archivist", resume_session_id="archive-1"),
        ),
    )
    assert [entry.identity for entry in config.agents] == [None, "reviewer-main", "archive-1"]
    assert retinue.load_config is load_config
    assert retinue.LoopConfig is LoopConfig


def test_parse_config_defaults_to_cap_ten_and_no_agents() -> None:
    """R13.1: an empty configuration means a cap of 10 and no agents."""
    assert parse_config({}) == LoopConfig(max_parallel_tool_calls=10, agents=())


def test_parse_config_accepts_the_extreme_max_tokens() -> None:
    """R13.1: ``max_tokens`` may be anything in 1..2**53-1."""
    config = parse_config(
        {"agents": [{"id": "a", "max_tokens": 1}, {"id": "b", "max_tokens": 2**53 - 1}]}
    )
    assert [entry.max_tokens for entry in config.agents] == [1, 2**53 - 1]


def test_parse_config_treats_an_empty_resume_session_id_as_absent() -> None:
    """R13.2: only a non-empty ``resume_session_id`` excludes ``session_id``."""
    config = parse_config({"agents": [{"id": "a", "session_id": "s", "resume_session_id": ""}]})
    assert config.agents[0] == AgentEntry("a", session_id="s")


async def test_parse_config_allows_entries_sharing_a_label_without_exact_ids(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.2, R13.3: only exact identities must be unique; entries without one each get a fresh id.

    Parsing keeps both entries, neither naming an id; the fresh ids are made
    when the agents start, one ``worker-session-<uuid4>`` each.
    """
    config = parse_config({"agents": [{"id": "worker"}, {"id": "worker"}]})
    assert config.agents == (AgentEntry("worker"), AgentEntry("worker"))
    assert [entry.identity for entry in config.agents] == [None, None]
    async with runtime(ScriptedModel([]), config=config) as rt:
        ids = [agent.id for agent in rt.agents.list()]
    assert len(ids) == len(set(ids)) == 2, ids
    for agent_id in ids:
        label, separator, fresh = agent_id.partition("-session-")
        assert (label, separator) == ("worker", "-session-"), agent_id
        assert str(uuid.UUID(fresh)) == fresh, agent_id
        assert uuid.UUID(fresh).version == 4, agent_id


INVALID = [
    ("max_parallel_tool_calls = 0", "max_parallel_tool_calls: must be a positive integer, got 0"),
    ("max_parallel_tool_calls = -3", "max_parallel_tool_calls: must be a positive integer, got -3"),
    ("max_parallel_tool_calls = 2.5", "max_parallel_tool_calls: expected an integer, got 2.5"),
    ("max_parallel_tool_calls = true", "max_parallel_tool_calls: expected an integer, got True"),
    ('max_parallel_tool_calls = "4"', "max_parallel_tool_calls: expected an integer, got '4'"),
    (
        '[[agents]]\nid = "a"\n[[agents]]\nid = "b"\n[[agents]]\nid = "c"\nmax_tokens = 0',
        "agents[2].max_tokens: must be an integer in 1..2**53-1, got 0",
    ),
    (
        '[[agents]]\nid = "a"\nmax_tokens = 9007199254740992',
        "agents[0].max_tokens: must be an integer in 1..2**53-1, got 9007199254740992",
    ),
    ('[[agents]]\nid = "a"\nmax_tokens = false', "agents[0].max_tokens: expected an integer"),
    (
        '[[agents]]\nid = "a"\nsession_id = "s"\nresume_session_id = "r"',
        "agents[0].resume_session_id: cannot be combined with session_id",
    ),
    (
        '[[agents]]\nid = "a"\nsession_id = "s"\n[[agents]]\nid = "b"\nsession_id = "s"',
        "agents[1].session_id: session 's' is already named by agents[0]",
    ),
    (
        '[[agents]]\nid = "a"\nsession_id = "s"\n[[agents]]\nid = "b"\nresume_session_id = "s"',
        "agents[1].resume_session_id: session 's' is already named by agents[0]",
    ),
    ('[[agents]]\nid = "a"\nsessionId = "s"', "agents[0].sessionId: unknown key"),
    ("verbose = true", "verbose: unknown key"),
    ('[[agents]]\nmodel = "m"', "agents[0].id: required key missing"),
    ('[[agents]]\nid = ""', "agents[0].id: must be a non-empty label"),
    ('[[agents]]\nid = "a/b"', "agents[0].id: must be a valid label: 'a/b' contains a path"),
    ('[[agents]]\nid = "a"\nsession_id = ""', "agents[0].session_id: must be a valid session"),
    ('[[agents]]\nid = "a"\ncwd = "relative"', "agents[0].cwd: must be an absolute path"),
    ('[[agents]]\nid = "a"\nmodel = 4', "agents[0].model: expected a string, got 4"),
    ('[agents]\nid = "a"', "agents: expected an array of tables"),
    ("agents = [1]", "agents[0]: expected a table, got 1"),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_load_config_names_the_file_and_key_path_of_every_problem(
    tmp_path: Path, text: str, expected: str
) -> None:
    """R13.1, R13.2: each invalid value raises ConfigError naming the file and the key path."""
    path = write(tmp_path, text)
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message.startswith(f"invalid configuration in {path}: ")
    assert expected in raised.value.message


def test_parse_config_reports_every_problem_without_a_file() -> None:
    """R13.2: problems in several places are all listed; a mapping names no file."""
    data = {"max_parallel_tool_calls": False, "agents": [{"id": "a", "extra": 1}], "other": 2}
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config(data)
    message = raised.value.message
    assert message.startswith("invalid configuration: ")
    for expected in (
        "max_parallel_tool_calls: expected an integer, got False",
        "agents[0].extra: unknown key",
        "other: unknown key",
    ):
        assert expected in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"max_parallel_tool_calls": 0, "agents": [{"id": 5}]},
            ["agents[0].id: expected a string, got 5", "max_parallel_tool_calls: must be a"],
        ),
        (
            {"agents": [{"id": "a", "max_tokens": "x", "cwd": "relative"}]},
            ["agents[0].max_tokens: expected an integer", "agents[0].cwd: must be an absolute"],
        ),
        (
            {"agents": [{"id": "", "max_tokens": 0, "cwd": "rel"}]},
            ["agents[0].id: must be a non-empty", "agents[0].max_tokens: must be", "agents[0].cwd"],
        ),
        (
            {
                "max_parallel_tool_calls": 0,
                "agents": [{"id": "a", "session_id": "s"}, {"id": "b", "session_id": "s"}],
            },
            ["max_parallel_tool_calls: must be", "agents[1].session_id: session 's' is already"],
        ),
    ],
)
def test_parse_config_reports_value_problems_beside_other_problems(
    data: dict[str, object], expected: list[str]
) -> None:
    """R13.2: a wrongly typed key or a failed check hides no other value problem."""
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config(data)
    for problem in expected:
        assert problem in raised.value.message


def test_parse_config_lists_every_duplicate_identity() -> None:
    """R13.2: every entry naming a session an earlier entry names is listed, also one that
    does not build for another reason."""
    data = {
        "agents": [
            {"id": "a", "session_id": "x"},
            {"id": "b", "session_id": "x"},
            {"id": "c", "session_id": "y"},
            {"id": "d", "resume_session_id": "y"},
            {"id": 7, "session_id": "x"},
        ]
    }
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config(data)
    assert raised.value.message == (
        "invalid configuration: agents[4].id: expected a string, got 7; "
        "agents[1].session_id: session 'x' is already named by agents[0]; "
        "agents[3].resume_session_id: session 'y' is already named by agents[2]; "
        "agents[4].session_id: session 'x' is already named by agents[0]"
    )


def test_values_built_in_python_list_every_duplicate_identity() -> None:
    """R13.2: a configuration built directly lists every duplicate too."""
    entries = [AgentEntry(label, session_id=label[0]) for label in ("a1", "b1", "a2", "b2")]
    with pytest.raises(retinue.ConfigError) as raised:
        LoopConfig(agents=entries)
    assert raised.value.message == (
        "agents[2].session_id: session 'a' is already named by agents[0]; "
        "agents[3].session_id: session 'b' is already named by agents[1]"
    )


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"id": 5, "session_id": "x", "resume_session_id": "y"},
            (
                "agents[0].id: expected a string, got 5; "
                "agents[0].resume_session_id: cannot be combined with session_id"
            ),
        ),
        (
            {"id": "a", "session_id": "x", "resume_session_id": "a/b"},
            (
                "agents[0].resume_session_id: must be a valid session id: 'a/b' contains a path "
                "separator; agents[0].resume_session_id: cannot be combined with session_id"
            ),
        ),
        (
            {"id": "a", "session_id": "x", "resume_session_id": "y", "max_tokens": 0},
            (
                "agents[0].max_tokens: must be an integer in 1..2**53-1, got 0; "
                "agents[0].resume_session_id: cannot be combined with session_id"
            ),
        ),
        (
            {"id": "a", "session_id": "x", "resume_session_id": "y"},
            "agents[0].resume_session_id: cannot be combined with session_id",
        ),
        (
            {"id": 5, "session_id": "x", "resume_session_id": ""},
            "agents[0].id: expected a string, got 5",
        ),
    ],
    ids=["wrong type", "invalid id", "invalid value", "alone", "empty resume id"],
)
def test_parse_config_reports_both_identities_beside_the_entry_s_other_problems(
    entry: dict[str, object], expected: str
) -> None:
    """R13.2: ``session_id`` with a non-empty ``resume_session_id`` is reported with the other
    problems of its entry, once; an empty ``resume_session_id`` is absent."""
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config({"agents": [entry]})
    assert raised.value.message == f"invalid configuration: {expected}"


def test_parse_config_names_keys_that_are_not_strings() -> None:
    """R13.2: a mapping built in Python may have any keys; each is an unknown key."""
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config({1: 2, "a": 3})  # type: ignore[dict-item]
    assert "1: unknown key; a: unknown key" in raised.value.message


def test_load_config_quotes_an_unknown_key_that_is_not_a_bare_key(tmp_path: Path) -> None:
    """R13.2: an unknown key with an invisible character, a space or a dot is named quoted;
    named as written, it read as the known key it looks like, or as a key path."""
    path = write(
        tmp_path,
        '"max_parallel_tool_calls\\u200b" = 4\n"agents.0" = 1\n'
        '[[agents]]\nid = "a"\n"model " = "m"\nfoo = 1',
    )
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == (
        f"invalid configuration in {path}: agents[0].'model ': unknown key; "
        "agents[0].foo: unknown key; 'agents.0': unknown key; "
        "'max_parallel_tool_calls\\u200b': unknown key"
    )


def test_parse_config_names_a_given_source() -> None:
    """R13.2: ``source`` is named like a file path."""
    with pytest.raises(retinue.ConfigError, match=r"in launcher\.toml: max_parallel_tool_calls"):
        parse_config({"max_parallel_tool_calls": 0}, source="launcher.toml")


def test_parse_config_rejects_a_document_that_is_not_a_table() -> None:
    """R13.1: the top level must be a table."""
    with pytest.raises(retinue.ConfigError, match="expected a table"):
        parse_config([1, 2])  # type: ignore[arg-type]


def test_load_config_reports_invalid_toml_and_missing_files(tmp_path: Path) -> None:
    """R13.1: unreadable files and TOML syntax errors are ConfigErrors naming the file."""
    broken = write(tmp_path, "agents = [")
    with pytest.raises(retinue.ConfigError, match=f"invalid TOML in {broken}"):
        load_config(broken)
    missing = tmp_path / "absent.toml"
    with pytest.raises(retinue.ConfigError, match=f"cannot read configuration {missing}"):
        load_config(missing)
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[[agents]]\nname = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(retinue.ConfigError, match=f"invalid TOML in {latin1}: not UTF-8"):
        load_config(latin1)


@pytest.mark.parametrize(
    "nested", ["[" * 5000 + "]" * 5000, "{a = " * 5000 + "1" + "}" * 5000], ids=["arrays", "tables"]
)
def test_load_config_reports_toml_nested_too_deeply_as_a_config_error(
    tmp_path: Path, nested: str
) -> None:
    """R13.1: a file nesting arrays or inline tables deeper than the TOML reader recurses
    is a ConfigError naming the file, not a bare RecursionError."""
    path = write(tmp_path, f"agents = {nested}")
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == f"invalid TOML in {path}: nested too deeply to read"


def test_load_config_reports_a_path_with_a_nul_as_a_config_error() -> None:
    """R13.1: a path no file can have (it holds a NUL) is a ConfigError naming it, not the
    bare ValueError of ``open``."""
    with pytest.raises(retinue.ConfigError) as raised:
        load_config("retinue\0.toml")
    assert raised.value.message == (
        "cannot read configuration 'retinue\\x00.toml': the path contains a NUL"
    )


def test_load_config_says_an_empty_path_is_empty() -> None:
    """R13.1: an empty path (an unset variable) is named as empty, not left blank in the
    message as if a file had no name."""
    with pytest.raises(retinue.ConfigError) as raised:
        load_config("")
    assert raised.value.message == "cannot read configuration: the path is empty"


def test_load_config_names_a_byte_order_mark_as_the_problem(tmp_path: Path) -> None:
    """R13.1: a file saved with a UTF-8 byte order mark, which TOML does not allow, is
    refused naming the mark, not as an invalid statement at line 1, column 1."""
    path = tmp_path / "retinue.toml"
    path.write_bytes(b"\xef\xbb\xbfmax_parallel_tool_calls = 4\n")
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == (
        f"invalid TOML in {path}: the file starts with a byte order mark (U+FEFF), which "
        "TOML does not allow: save it as UTF-8 without one"
    )


@pytest.mark.parametrize(
    "path", [2**20, None, b"retinue.toml", ["retinue.toml"]], ids=["int", "None", "bytes", "list"]
)
def test_load_config_refuses_a_path_that_is_not_a_str_or_path_like(path: object) -> None:
    """R13.1: the file is named by a path; anything else, a file descriptor included, is a
    ``TypeError`` naming the argument and the type it got, raised before anything is opened."""
    message = rf"^path must be a str or an os\.PathLike, got {type(path).__name__}$"
    with pytest.raises(TypeError, match=message):
        load_config(path)  # type: ignore[arg-type]


def test_load_config_neither_reads_nor_closes_a_file_descriptor(tmp_path: Path) -> None:
    """R13.1: a file descriptor is refused, not read and closed behind its owner's back."""
    descriptor = os.open(write(tmp_path, "max_parallel_tool_calls = 4"), os.O_RDONLY)
    try:
        with pytest.raises(TypeError, match=r"got int$"):
            load_config(descriptor)  # type: ignore[arg-type]
        assert os.read(descriptor, 100) == b"max_parallel_tool_calls = 4"
    finally:
        os.close(descriptor)


def test_values_built_in_python_are_validated_too() -> None:
    """R13.2: the same rules guard values constructed directly."""
    with pytest.raises(retinue.ConfigError, match="max_tokens: must be an integer"):
        AgentEntry("a", max_tokens=0)
    with pytest.raises(retinue.ConfigError, match="resume_session_id: cannot be combined"):
        AgentEntry("a", session_id="s", resume_session_id="r")
    with pytest.raises(retinue.ConfigError, match="max_parallel_tool_calls: must be a positive"):
        LoopConfig(max_parallel_tool_calls=True)
    with pytest.raises(retinue.ConfigError, match=r"agents\[1\].session_id: session 's'"):
        LoopConfig(agents=[AgentEntry("a", session_id="s"), AgentEntry("b", session_id="s")])


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ({"id": "a", "session_id": ".."}, "agents[0].session_id: must be a valid session id: '..'"),
        ({"id": "a", "session_id": "s" * 513}, "is longer than 512 characters"),
        ({"id": "a", "resume_session_id": "."}, "agents[0].resume_session_id: must be a valid"),
        ({"id": "a", "session_id": "tab\there"}, "contains the control character U+0009"),
        ({"id": "l" * 468}, "agents[0].id: must be at most 467 characters, got 468"),
        ({"id": "a\\b"}, "agents[0].id: must be a valid label: 'a\\\\b' contains a path"),
    ],
)
def test_parse_config_refuses_ids_no_store_can_hold(
    agent: dict[str, object], expected: str
) -> None:
    """R13.2, R13.3: an exact id, or the fresh ``<label>-session-<uuid4>``, must pass the
    stores' session-id rule at load, not fail when the agent starts."""
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config({"agents": [agent]})
    assert expected in raised.value.message


def test_parse_config_accepts_the_longest_ids_a_store_holds() -> None:
    """R13.3: a 512-character id and a label whose fresh session id is 512 characters load."""
    config = parse_config({"agents": [{"id": "a", "session_id": "s" * 512}, {"id": "l" * 467}]})
    check_session_id(config.agents[0].identity)
    check_session_id(f"{config.agents[1].id}-session-{uuid.uuid4()}")
    assert parse_config({"agents": [{"id": ".."}]}).agents[0].id == ".."


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: AgentEntry(None), "id: must be a string, got None"),  # type: ignore[arg-type]
        (lambda: AgentEntry(""), "id: must be a non-empty label"),
        (lambda: AgentEntry("a", cwd=5), "cwd: must be an absolute path as a str, got 5"),  # type: ignore[arg-type]
        (lambda: AgentEntry("a", cwd="/a\x00b"), "cwd: must not contain a NUL character"),
        (lambda: AgentEntry("a", model=5), "model: must be a non-empty string, got 5"),  # type: ignore[arg-type]
        (lambda: AgentEntry("a", model=""), "model: must be a non-empty string, got ''"),
        (lambda: AgentEntry("a", provider=""), "provider: must be a non-empty string"),
        (lambda: AgentEntry("a", provider=[]), "provider: must be a non-empty string, got []"),  # type: ignore[arg-type]
        (lambda: AgentEntry("a", resume_session_id=0), "resume_session_id: must be a string"),  # type: ignore[arg-type]
        (lambda: LoopConfig(agents=5), "agents: expected a sequence of AgentEntry, got 5"),
        (lambda: LoopConfig(agents="ab"), "agents: expected a sequence of AgentEntry, got 'ab'"),
        (lambda: LoopConfig(agents=[{"id": "a"}]), "agents[0]: expected an AgentEntry, got {"),
        (lambda: LoopConfig(agents={"id": "a"}), "agents: expected a sequence of AgentEntry"),
    ],
)
def test_values_built_in_python_fail_with_a_config_error_naming_the_field(
    build: Callable[[], object], expected: str
) -> None:
    """R13.1, R13.2: a wrongly typed or unusable value built in Python is a ConfigError at
    construction, never a TypeError or a failure when the agent runs."""
    with pytest.raises(retinue.ConfigError) as raised:
        build()
    assert expected in raised.value.message


def test_parse_config_refuses_empty_model_and_provider_and_a_nul_in_cwd() -> None:
    """R13.1: a model or provider that is empty, or a cwd with a NUL, would fail at the first step."""
    data = {"agents": [{"id": "a", "model": "", "provider": " ", "cwd": "/srv/\x00"}]}
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config(data)
    for problem in (
        "agents[0].model: must be a non-empty string",
        "agents[0].provider: must be a non-empty string",
        "agents[0].cwd: must not contain a NUL character",
    ):
        assert problem in raised.value.message


# -- R13.5 identity overrides ---------------------------------------------------------------


BASE = LoopConfig(
    agents=(
        AgentEntry("writer", resume_session_id="old-writer", model="m"),
        AgentEntry("reviewer", session_id="old-reviewer"),
        AgentEntry("helper"),
    )
)


def test_with_overrides_replaces_both_identity_keys() -> None:
    """R13.5: an override sets one identity key and clears the other; the rest is kept."""
    config = with_overrides(
        BASE, {"writer": Identity("new-writer"), "reviewer": Identity("r-7", resume=True)}
    )
    assert config.agents == (
        AgentEntry("writer", session_id="new-writer", model="m"),
        AgentEntry("reviewer", resume_session_id="r-7"),
        AgentEntry("helper"),
    )
    assert BASE.agents[0].resume_session_id == "old-writer"


def test_with_overrides_can_give_an_entry_without_identity_one() -> None:
    """R13.5: an entry with no exact id gets the override's identity."""
    config = with_overrides(BASE, {"helper": Identity("helper-1", resume=True)})
    assert config.agents[2] == AgentEntry("helper", resume_session_id="helper-1")


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: Identity(""), "id: must be a valid session id: '' is empty"),
        (lambda: Identity(None), "id: must be a string, got None"),  # type: ignore[arg-type]
        (lambda: Identity(5), "id: must be a string, got 5"),  # type: ignore[arg-type]
        (lambda: Identity(".."), "id: must be a valid session id: '..' is a relative path"),
        (lambda: Identity("a/b"), "id: must be a valid session id: 'a/b' contains a path"),
        (lambda: Identity("s" * 513), "id: must be a valid session id: 'sss"),
        (lambda: Identity("x", resume=1), "resume: must be a boolean, got 1"),  # type: ignore[arg-type]
        (lambda: Identity("x", resume="yes"), "resume: must be a boolean, got 'yes'"),  # type: ignore[arg-type]
        (lambda: Identity("x", resume=None), "resume: must be a boolean, got None"),  # type: ignore[arg-type]
    ],
)
def test_identity_refuses_a_malformed_field_when_built(
    build: Callable[[], object], expected: str
) -> None:
    """R13.2, R13.5: an override's id obeys the stores' session-id rule and ``resume`` is a
    bool, checked at construction with a ConfigError naming the field, not when applied."""
    with pytest.raises(retinue.ConfigError) as raised:
        build()
    assert raised.value.message.startswith(expected)


def test_identity_accepts_the_ids_an_entry_accepts() -> None:
    """R13.5: every id a store holds, up to 512 characters, is a valid override."""
    assert Identity("s" * 512, resume=True).id == "s" * 512
    assert Identity("reviewer-main").resume is False


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        ("new-id", "agents[0] (label 'h'): expected an Identity, got 'new-id'"),
        (None, "agents[0] (label 'h'): expected an Identity, got None"),
        ({"id": "x"}, "agents[0] (label 'h'): expected an Identity, got {'id': 'x'}"),
    ],
)
def test_with_overrides_never_silently_drops_or_keeps_an_identity(
    identity: object, expected: str
) -> None:
    """R13.5: an override replaces the identity with an Identity or raises naming the entry;
    a value that is none, None included, neither clears nor keeps the old identity."""
    base = LoopConfig(agents=(AgentEntry("h", session_id="keep-me"),))
    with pytest.raises(retinue.ConfigError) as raised:
        with_overrides(base, {"h": identity})  # type: ignore[dict-item]
    assert raised.value.message.startswith("invalid identity overrides: ")
    assert expected in raised.value.message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nobody": Identity("x")}, "unknown agent labels: 'nobody'"),
        ({1: Identity("x"), "z": Identity("y")}, "unknown agent labels: 'z', 1"),
        ({"helper": Identity("old-reviewer")}, "agents[2].session_id: session 'old-reviewer'"),
        (
            {"helper": Identity("old-writer", resume=True)},
            "agents[2].resume_session_id: session 'old-writer' is already named by agents[0]",
        ),
        ([("helper", Identity("x"))], "expected a mapping of label to Identity, got [("),
        (None, "expected a mapping of label to Identity, got None"),
    ],
)
def test_with_overrides_rejects_unknown_labels_and_clashing_identities(
    overrides: object, expected: str
) -> None:
    """R13.2, R13.5: overrides obey the load-time rules; the error names the key at fault."""
    with pytest.raises(retinue.ConfigError) as raised:
        with_overrides(BASE, overrides)  # type: ignore[arg-type]
    assert expected in raised.value.message


def test_an_override_for_a_label_several_entries_share_is_refused_as_ambiguous() -> None:
    """R13.5: every entry of a label would get the one identity; the error says why it cannot."""
    shared = parse_config({"agents": [{"id": "a"}, {"id": "b"}, {"id": "a"}]})
    with pytest.raises(retinue.ConfigError) as raised:
        with_overrides(shared, {"a": Identity("same")})
    assert (
        "label 'a' is ambiguous: agents[0] and agents[2] share that label" in raised.value.message
    )
    assert with_overrides(shared, {"b": Identity("own")}).agents[1].session_id == "own"


# -- R13.6 the editable cap -----------------------------------------------------------------


def test_parallel_cap_setting_accepts_valid_writes_and_notifies() -> None:
    """R13.6: a valid write replaces the value and reaches every subscriber."""
    setting = ParallelCapSetting()
    heard: list[int] = []
    unsubscribe = setting.subscribe(heard.append)
    assert setting.value == 10
    setting.value = 3
    unsubscribe()
    unsubscribe()
    setting.value = 5
    assert (setting.value, heard) == (5, [3])


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "4", None])
def test_parallel_cap_setting_refuses_invalid_writes_and_keeps_the_last_good_value(
    bad: object,
) -> None:
    """R13.6: an invalid write raises ConfigError; the value and subscribers are untouched."""
    setting = ParallelCapSetting(4)
    heard: list[int] = []
    setting.subscribe(heard.append)
    with pytest.raises(retinue.ConfigError, match="max_parallel_tool_calls: must be a positive"):
        setting.value = bad  # type: ignore[assignment]
    assert (setting.value, heard) == (4, [])


def test_parallel_cap_setting_contains_a_failing_subscriber(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R13.6: a subscriber failure is logged; the write and later subscribers still happen."""
    setting = ParallelCapSetting(2)
    heard: list[int] = []

    def broken(_value: int) -> None:
        raise RuntimeError("listener bug")

    setting.subscribe(broken)
    setting.subscribe(heard.append)
    setting.value = 6
    assert (setting.value, heard) == (6, [6])
    assert "listener bug" in caplog.text


def test_parallel_cap_setting_refuses_an_invalid_initial_value() -> None:
    """R13.6: the setting never holds an invalid value."""
    with pytest.raises(retinue.ConfigError):
        ParallelCapSetting(0)


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"agents": [_nested(100_000)]},
            "agents[0]: expected a table, got a list nested too deeply to show",
        ),
        ({"agents": [list(range(2000))]}, "agents[0]: expected a table, got [0, 1, 2"),
        ({"max_parallel_tool_calls": "x" * 500}, "(500 characters)"),
    ],
    ids=["nested", "long-list", "long-string"],
)
def test_a_bad_value_is_shown_short_in_its_message(data: dict[str, object], message: str) -> None:
    """R13.2: the message names the key and shows the value cut short; a value nested
    too deeply to show says so instead of leaking the RecursionError's text."""
    with pytest.raises(retinue.ConfigError) as caught:
        parse_config(data)
    assert message in str(caught.value)
    assert len(str(caught.value)) < 400
