"""Strict ``{{variable}}`` rendering of system-prompt sections (R7.52)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from retinue.prompt import PromptError, Section, check_template, render

VARIABLES = {"name": "Ada", "cwd": "/srv", "braces": "{{not a group}}", "unset": None}


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("hello {{name}}", "hello Ada"),
        ("hello {{ name }} in {{cwd}}", "hello Ada in /srv"),
        ("hello {{\nname\n}}", "hello Ada"),
        ("values are not parsed again: {{braces}}", "values are not parsed again: {{not a group}}"),
        ("no groups at all", "no groups at all"),
    ],
)
def test_render_substitutes_every_group(text: str, rendered: str) -> None:
    """R7.52: each ``{{name}}`` (whitespace and line breaks around the name allowed) is its value."""
    assert render([Section("s", text)], VARIABLES) == rendered


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x }} and {{ y", "unbalanced variable group"),
        ("a {{ name", "unbalanced variable group"),
        ("a name }}", "unbalanced variable group"),
        ("{{name}} }}", "unbalanced variable group"),
        ("{{ two words }}", "malformed variable group"),
        ("{{}}", "malformed variable group"),
        ("{{missing}}", "unknown variable 'missing'"),
        ("{{unset}}", "variable 'unset' has no value"),
    ],
)
def test_render_refuses_what_it_cannot_substitute(text: str, problem: str) -> None:
    """R7.52: an unknown or valueless variable, or a malformed group, raises naming the section."""
    with pytest.raises(PromptError, match=problem) as caught:
        render([Section("persona", text)], VARIABLES)
    assert "'persona'" in str(caught.value)


def test_render_orders_sections_and_drops_empty_ones() -> None:
    """R7.52: ascending order, empty sections dropped, joined by blank lines."""
    sections = [Section("b", "second", 5), Section("empty", "  ", 1), Section("a", "first", -1)]
    assert render(sections, {}) == "first\n\nsecond"


def test_render_refuses_a_variable_that_is_not_text() -> None:
    """R7.52: a variable's value is text; another type is a PromptError naming it."""
    with pytest.raises(PromptError, match="'count' is not text but int"):
        render([Section("s", "{{count}} items")], {"count": 3})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        (r"literal \{{name\}}", "literal {{name}}"),
        (r'JSON like {"a": {"b": 1\}}', 'JSON like {"a": {"b": 1}}'),
        (r"\{{{{name}}\}}", "{{Ada}}"),
        (r"a single \{ brace and \ stay", r"a single \{ brace and \ stay"),
    ],
)
def test_render_writes_escaped_double_braces_literally(text: str, rendered: str) -> None:
    """R7.52: ``\\{{`` and ``\\}}`` are literal double braces; nothing else is escaped."""
    assert render([Section("s", text)], VARIABLES) == rendered


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('JSON like {"a": {"b": 1}}', "a lone '}}' at character 23"),
        ("{{ name }} and {{", "a lone '{{' at character 15"),
        ("{{ two words }}", "malformed variable group"),
    ],
)
def test_check_template_finds_syntax_errors_without_variables(text: str, problem: str) -> None:
    """R7.52: a template's syntax is checked without any variable values; a lone brace pair
    names its place and the escape."""
    with pytest.raises(PromptError, match=problem) as caught:
        check_template(text, "persona")
    assert "'persona'" in str(caught.value)
    check_template("{{unknown}} is looked up per turn, not here", "persona")


def test_render_refuses_a_section_that_is_not_text() -> None:
    """R7.52: a section whose text is not a string is a PromptError naming it."""
    with pytest.raises(PromptError, match="section 's' is not text but NoneType"):
        render([Section("s", None)], {})  # type: ignore[arg-type]


# Typed as anything: what a caller outside the type checker's sight may pass.
ORDER_TEXT: Any = "10"
NO_ORDER: Any = None


@pytest.mark.parametrize(
    ("sections", "problem"),
    [
        ([Section("rules", "x", order=ORDER_TEXT), Section("persona", "y")], "order '10'"),
        ([Section("rules", "x", order=NO_ORDER), Section("persona", "y")], "order None"),
        ([Section("persona", "y"), "Answer in one sentence."], "a section is str, not a Section"),
    ],
)
def test_render_refuses_what_is_no_section_or_is_ordered_by_no_int(
    sections: list[Section], problem: str
) -> None:
    """R7.52: rendering refuses an item that is no section, or a section ordered by no int, with a
    PromptError naming it, not a bare TypeError or AttributeError from sorting that names
    neither."""
    with pytest.raises(PromptError, match=problem):
        render(sections, {})


@pytest.mark.parametrize(
    ("section", "shown"),
    [
        (
            Section("doc", "Example: {{ " + "word " * 200_000 + "}}"),
            (
                "malformed variable group '{{ word word word word word word word w...' "
                "(1000005 characters) in section 'doc'"
            ),
        ),
        (
            Section("s", "{{" + "v" * 1_000_000 + "}}"),
            (
                "unknown variable 'vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv...' (1000000 characters) "
                "in section 's'"
            ),
        ),
        (
            Section("n" * 1_000_000, "}}"),
            "in section 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' (1000000 characters)",
        ),
    ],
    ids=["group", "variable", "section"],
)
def test_a_render_error_shows_a_long_group_or_name_by_its_start(
    section: Section, shown: str
) -> None:
    """R7.52: a malformed group, a variable or a section name of megabytes is shown by its start and
    length, not quoted whole: a turn's error, logged in its turn/end, must not grow by a megabyte
    for each turn the template fails."""
    with pytest.raises(PromptError) as raised:
        render([section], {})
    assert shown in str(raised.value)
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize("variables", [[("name", "Ada")], None], ids=["pairs", "none"])
def test_render_refuses_variables_that_are_no_mapping(variables: Any) -> None:
    """R7.52: variables given as pairs or None are a TypeError naming the argument: pairs do not
    make "unknown variable 'name'" of a variable given, nor None a bare TypeError about iterating
    None."""
    with pytest.raises(TypeError, match="variables must be a mapping of name to text, got"):
        render([Section("s", "hello {{name}}")], variables)


@pytest.mark.parametrize(
    "variables",
    [[("name", "Ada")], (("name", "Ada"),), "name", b"name", None, 3],
    ids=["pairs", "tuple", "str", "bytes", "none", "int"],
)
def test_render_refuses_variables_that_are_no_mapping_even_where_no_group_reads_them(
    variables: Any,
) -> None:
    """R7.52: what is no mapping is refused before any section is read, so a template
    without groups does not take it silently (a str and a list can be indexed too)."""
    with pytest.raises(TypeError, match="variables must be a mapping of name to text, got"):
        render([Section("s", "no groups")], variables)


class _KeyedLookup:
    """A mapping as ``dict.update`` takes one: ``keys()`` and ``[]``, no Mapping base."""

    def __init__(self, values: dict[str, str | None]) -> None:
        self._values = values

    def keys(self) -> list[str]:
        return list(self._values)

    def __getitem__(self, name: str) -> str | None:
        return self._values[name]


def test_render_looks_variables_up_by_name_in_an_object_with_keys() -> None:
    """R7.52: an object with ``keys()`` and ``[]`` is read as ``dict()`` reads a mapping."""
    variables = _KeyedLookup(VARIABLES)
    assert render([Section("s", "hello {{ name }}")], variables) == "hello Ada"  # type: ignore[arg-type]
    with pytest.raises(PromptError, match="unknown variable 'missing'"):
        render([Section("s", "{{missing}}")], variables)  # type: ignore[arg-type]
    with pytest.raises(PromptError, match="variable 'unset' has no value"):
        render([Section("s", "{{unset}}")], variables)  # type: ignore[arg-type]


def test_render_takes_no_value_a_mapping_makes_up_for_a_missing_name() -> None:
    """R7.52: a mapping is asked whether it has a name before it is read, so a defaultdict
    does not make an unknown variable an empty text."""
    with pytest.raises(PromptError, match="unknown variable 'missing'"):
        render([Section("s", "{{missing}}")], defaultdict(str))


def test_render_joins_a_surrogate_pair_split_between_a_section_and_a_variable() -> None:
    """R1.6, R8.1: a pair held as two code points, half in the text and half in a variable's
    value, is rendered as its one character, the string a request header logs and reloads."""
    rendered = render([Section("s", "Smile \ud83d{{face}} \ud83d\ude00")], {"face": "\ude00"})
    assert rendered == "Smile \U0001f600 \U0001f600"
