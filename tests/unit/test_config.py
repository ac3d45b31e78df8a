"""Loop configuration loading: the values a file or a mapping gives, and a file that
cannot be read (SPEC 13; R13.1, R13.2, R13.3)."""

from __future__ import annotations

import os
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
import trio
import trio.testing

import retinue
from retinue.config import AgentEntry, LoopConfig, load_config, parse_config
from retinue.stores import check_session_id
from retinue.testing import ScriptedModel
from tests.helpers import runtime
from tests.unit._config_kit import write

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


def test_parse_config_reads_the_turn_limits_of_an_entry() -> None:
    """R13.1: an entry may set ``max_steps`` and ``max_prompts_per_turn`` (each 1..2**53-1),
    as ``AgentOptions`` has them; absent, neither limits anything."""
    config = parse_config(
        {
            "agents": [
                {"id": "a", "max_steps": 1, "max_prompts_per_turn": 2**53 - 1},
                {"id": "b"},
            ]
        }
    )
    assert config.agents == (
        AgentEntry("a", max_steps=1, max_prompts_per_turn=2**53 - 1),
        AgentEntry("b"),
    )
    assert (config.agents[1].max_steps, config.agents[1].max_prompts_per_turn) == (None, None)


@pytest.mark.parametrize("key", ["max_steps", "max_prompts_per_turn", "max_tokens"])
@pytest.mark.parametrize("value", [0, -1, 2**53, 1.5, True, "3"])
def test_parse_config_names_an_invalid_turn_limit_by_its_key(key: str, value: object) -> None:
    """R13.2: a count outside 1..2**53-1, or of another type, is refused naming its key path."""
    reason = "(must be a positive integer <= 2\\*\\*53-1|expected an integer), got "
    with pytest.raises(retinue.ConfigError, match=rf"agents\[1\]\.{key}: {reason}"):
        parse_config({"agents": [{"id": "a"}, {"id": "b", key: value}]})


def test_parse_config_reads_an_entry_s_model_settings_and_persona() -> None:
    """R13.1: an entry may set ``temperature`` (a TOML float or integer), ``stop`` (an array
    of strings) and ``system_prompt`` (a template), as ``AgentOptions`` has them."""
    config = parse_config(
        tomllib.loads(
            '[[agents]]\nid = "a"\ntemperature = 0.2\nstop = ["END", "##"]\n'
            'system_prompt = "You review code in {{cwd}}."\n'
            '[[agents]]\nid = "b"\ntemperature = 1\n'
        )
    )
    first, second = config.agents
    assert (first.temperature, first.stop, first.system_prompt) == (
        0.2,
        ("END", "##"),
        "You review code in {{cwd}}.",
    )
    assert (second.temperature, type(second.temperature)) == (1.0, float)
    assert AgentEntry("c", stop=["x"]).stop == ("x",)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"temperature": "0.5"}, "agents[0].temperature: expected a number, got '0.5'"),
        ({"temperature": True}, "agents[0].temperature: expected a number, got True"),
        ({"temperature": float("inf")}, "agents[0].temperature: must be a finite number, got inf"),
        ({"stop": "END"}, "agents[0].stop: expected an array of strings, got 'END'"),
        ({"stop": ["a", 1]}, "agents[0].stop[1]: expected a string, got 1"),
        ({"stop": ["a", ""]}, "agents[0].stop: must be a sequence of strings"),
        ({"system_prompt": "{{x"}, "agents[0].system_prompt: is not a valid prompt template"),
        ({"system_prompt": 3}, "agents[0].system_prompt: expected a string, got 3"),
    ],
)
def test_parse_config_names_an_invalid_model_setting_by_its_key(
    entry: dict[str, object], message: str
) -> None:
    """R13.2: each setting is checked by the rule ``AgentOptions`` applies, the failure
    naming its key path; a bare string is no array of stop sequences."""
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config({"agents": [{"id": "a", **entry}]})
    assert message in raised.value.message


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
    ("name", "kind"), [("c.json", "JSON"), ("c.YAML", "YAML"), ("c.yml", "YAML")]
)
def test_load_config_says_a_json_or_yaml_file_is_not_toml(
    tmp_path: Path, name: str, kind: str
) -> None:
    """R13.1: a file its name says is JSON or YAML, which the TOML reader refuses, is named
    as such, with where its mapping goes; a TOML file's syntax error gets no such hint."""
    path = tmp_path / name
    path.write_text('{"agents": []}' if kind == "JSON" else "agents: []\n")
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message.startswith(f"invalid TOML in {path}: ")
    assert raised.value.message.endswith(
        f"(load_config reads TOML only: for {kind}, parse what the file holds and give the "
        "mapping to parse_config)"
    )
    with pytest.raises(retinue.ConfigError) as toml:
        load_config(write(tmp_path, "agents: []\n"))
    assert "parse_config" not in toml.value.message


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
        "cannot read configuration 'retinue\\x00.toml': the path contains a NUL character, "
        "which no file name can hold"
    )


def test_load_config_reports_a_path_holding_a_lone_surrogate_as_a_config_error() -> None:
    """R13.1: a lone surrogate no bytes decoded to is refused as a NUL is, naming the path
    and the character, where ``open`` would raise a bare ``UnicodeEncodeError``."""
    with pytest.raises(retinue.ConfigError) as raised:
        load_config("retinue\ud800.toml")
    assert raised.value.message == (
        "cannot read configuration 'retinue\\ud800.toml': the path holds '\\ud800' at "
        f"position 7, which the file system's encoding ({sys.getfilesystemencoding()}) "
        "cannot write"
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


def test_parse_config_accepts_the_longest_ids_a_store_holds() -> None:
    """R13.3: a 512-character id and a label whose fresh session id is 512 characters load."""
    config = parse_config({"agents": [{"id": "a", "session_id": "s" * 512}, {"id": "l" * 467}]})
    check_session_id(config.agents[0].identity)
    check_session_id(f"{config.agents[1].id}-session-{uuid.uuid4()}")
    assert parse_config({"agents": [{"id": ".."}]}).agents[0].id == ".."


@pytest.mark.parametrize(
    "text",
    [
        "max_parallel_tool_calls = " + "9" * 5000,
        '[[agents]]\nid = "writer"\nmax_tokens = ' + "9" * 5000,
    ],
    ids=["cap", "max_tokens"],
)
def test_load_config_reports_an_integer_too_long_to_read_as_a_config_error(
    tmp_path: Path, text: str
) -> None:
    """R13.1: an integer of more digits than Python converts (4300) is a ConfigError naming
    the file, not the bare ValueError the TOML reader raised."""
    path = write(tmp_path, text + "\n")
    with pytest.raises(
        retinue.ConfigError, match=f"invalid TOML in {path}: a value cannot be read"
    ):
        load_config(path)


def test_load_config_refuses_a_file_larger_than_any_configuration(tmp_path: Path) -> None:
    """R13.1: a file past the size bound (16 MiB) is a ConfigError naming the file, read no further,
    so an endless one given by mistake (``/dev/zero``) is not read until memory runs out."""
    path = tmp_path / "huge.toml"
    with path.open("w") as file:
        file.write("max_parallel_tool_calls = 4\n")
        file.write("#" + "x" * 17 * 1024 * 1024 + "\n")
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == (
        f"cannot read configuration {path}: larger than {16 * 1024 * 1024} bytes, "
        "more than any configuration holds"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "max_parallel_tool_calls = 4\nmax_parallel_tool_calls = 5",
            "Cannot overwrite a value (at end of document, line 2: 'max_parallel_tool_calls = 5')",
        ),
        (
            '[[agents]]\nid = "a"\nid = "b"\n\nmodel = "m"\n',
            "Cannot overwrite a value (at line 3, column 9: 'id = \"b\"')",
        ),
        ("agents = [", "Invalid value (at end of document, line 1: 'agents = [')"),
    ],
    ids=["last-line", "inside", "unclosed"],
)
def test_a_toml_syntax_error_quotes_the_line_it_is_on(
    tmp_path: Path, text: str, expected: str
) -> None:
    """R13.1: a TOML syntax error names the line and quotes it, so a key given twice is named, not
    only a position, and a key given twice on a file's last line (no newline after it) gets its line
    too, not "at end of document"."""
    path = write(tmp_path, text)
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == f"invalid TOML in {path}: {expected}"


def test_a_file_that_is_not_utf8_names_the_line_and_column_of_the_first_bad_byte(
    tmp_path: Path,
) -> None:
    """R13.1: a configuration saved in Latin-1 names the line and column (in characters, as a syntax
    error counts them) of its first byte that is no UTF-8, not the codec's offset in bytes from the
    start of the file."""
    path = tmp_path / "retinue.toml"
    path.write_bytes('# résumé\n[[agents]]\nid = "é'.encode() + 'é"\n'.encode("latin-1"))
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == (
        f"invalid TOML in {path}: not UTF-8 text "
        "(byte 0xe9 at line 3, column 8: invalid continuation byte)"
    )
