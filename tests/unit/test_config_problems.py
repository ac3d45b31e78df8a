"""Loop configuration validation: every problem of a file, a mapping or a value built in
Python is reported, naming its key path (SPEC 13; R13.1, R13.2, R13.3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import retinue
from retinue.config import AgentEntry, LoopConfig, load_config, parse_config
from tests.unit._config_kit import write

INVALID = [
    ("max_parallel_tool_calls = 0", "max_parallel_tool_calls: must be a positive integer, got 0"),
    ("max_parallel_tool_calls = -3", "max_parallel_tool_calls: must be a positive integer, got -3"),
    ("max_parallel_tool_calls = 2.5", "max_parallel_tool_calls: expected an integer, got 2.5"),
    ("max_parallel_tool_calls = true", "max_parallel_tool_calls: expected an integer, got True"),
    ('max_parallel_tool_calls = "4"', "max_parallel_tool_calls: expected an integer, got '4'"),
    (
        '[[agents]]\nid = "a"\n[[agents]]\nid = "b"\n[[agents]]\nid = "c"\nmax_tokens = 0',
        "agents[2].max_tokens: must be a positive integer <= 2**53-1, got 0",
    ),
    (
        '[[agents]]\nid = "a"\nmax_tokens = 9007199254740992',
        "agents[0].max_tokens: must be a positive integer <= 2**53-1, got 9007199254740992",
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
                "agents[0].max_tokens: must be a positive integer <= 2**53-1, got 0; "
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
    """R13.2: an unknown key with an invisible character, a space or a dot is named quoted; named as
    written, it would read as the known key it looks like, or as a key path."""
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


def test_values_built_in_python_are_validated_too() -> None:
    """R13.2: the same rules guard values constructed directly."""
    with pytest.raises(retinue.ConfigError, match="max_tokens: must be a positive integer"):
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


def test_an_unknown_key_spelled_as_the_specification_spells_it_names_the_key_meant(
    tmp_path: Path,
) -> None:
    """R13.1: a key written in the specification's camelCase, or with capitals, is unknown and named
    with the snake_case key it means, not only as unknown."""
    path = write(
        tmp_path,
        'maxParallelToolCalls = 4\n[[agents]]\nid = "a"\nsessionId = "s"\nModel = "m"\n'
        "colour = 1\n",
    )
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == (
        f"invalid configuration in {path}: "
        "agents[0].Model: unknown key: the key is spelled model; "
        "agents[0].colour: unknown key; "
        "agents[0].sessionId: unknown key: the key is spelled session_id; "
        "maxParallelToolCalls: unknown key: the key is spelled max_parallel_tool_calls"
    )


def test_a_file_of_thousands_of_bad_entries_lists_the_first_fifty_problems(
    tmp_path: Path,
) -> None:
    """R13.2: the ConfigError lists the first 50 problems and counts the rest, so a file of
    thousands of bad entries makes no message of megabytes."""
    path = write(tmp_path, '[[agents]]\nid = ""\n' * 10_000)
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    message = raised.value.message
    assert message.startswith(
        f"invalid configuration in {path}: agents[0].id: must be a non-empty label, got ''; "
    )
    assert message.endswith(
        "; agents[49].id: must be a non-empty label, got ''; and 9950 more problems"
    )
    assert len(message) < 4000


def test_an_unknown_key_of_megabytes_is_shown_by_its_start() -> None:
    """R13.2: a long unknown key is cut to its start and length, as a long value is, so sixty keys
    of 100 KB make no message of five million characters."""
    keys = {f"k{index}" + "x" * 100_000: 1 for index in range(60)}
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config(keys)
    message = raised.value.message
    assert "k0xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (100002 characters): unknown key" in message
    assert len(message) < 10_000


@pytest.mark.parametrize("key", ["cwd", "model", "provider"])
def test_a_long_cwd_model_or_provider_is_shown_short_in_its_message(key: str) -> None:
    """R13.2: a cwd, model or provider a check refuses is shown by its start and length, as every
    other value is, so a relative path of a megabyte makes no message of a megabyte."""
    value = "relative/" + "x" * 1_000_000 if key == "cwd" else " " * 1_000_000
    with pytest.raises(retinue.ConfigError) as raised:
        parse_config({"agents": [{"id": "a", key: value}]})
    message = raised.value.message
    assert f"agents[0].{key}: must be " in message
    assert f"...' ({len(value)} characters)" in message
    assert len(message) < 400


@pytest.mark.parametrize("key", ["cwd", "model", "provider"])
def test_an_int_too_long_to_show_as_cwd_model_or_provider_is_a_config_error(key: str) -> None:
    """R13.1: an AgentEntry given an int of thousands of digits as its cwd, model or provider raises
    a ConfigError naming the field, not the bare ValueError of the int's repr."""
    with pytest.raises(retinue.ConfigError) as raised:
        AgentEntry("a", **{key: 10**5000})  # type: ignore[arg-type]
    assert raised.value.message.startswith(f"{key}: must be ")
    assert raised.value.message.endswith("got an integer of 16610 bits")


def test_an_unknown_key_written_with_hyphens_names_the_key_meant(tmp_path: Path) -> None:
    """R13.1: a key written with hyphens, as many TOML files write keys (``session-id``), is unknown
    and named with the snake_case key it means, not only as unknown."""
    path = write(tmp_path, 'max-parallel-tool-calls = 4\n[[agents]]\nid = "a"\nsession-id = "s"\n')
    with pytest.raises(retinue.ConfigError) as raised:
        load_config(path)
    assert raised.value.message == (
        f"invalid configuration in {path}: "
        "agents[0].session-id: unknown key: the key is spelled session_id; "
        "max-parallel-tool-calls: unknown key: the key is spelled max_parallel_tool_calls"
    )
