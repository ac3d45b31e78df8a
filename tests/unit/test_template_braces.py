"""Single braces next to a ``{{name}}`` group in a system-prompt template (R7.52; docs/hooks.md)."""

from __future__ import annotations

import pytest

import retinue
from retinue.prompt import PromptError, Section, check_template, render

VARIABLES = {"name": "Ada"}


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("{{{name}}}", "{Ada}"),
        ("{{{name}}", "{Ada"),
        ("{{name}}}", "Ada}"),
        ("{{{ name }}}", "{Ada}"),
        ("{{{\nname\n}}}", "{Ada}"),
        (r"\textbf{{{name}}}", r"\textbf{Ada}"),
        ("${{{name}}}", "${Ada}"),
        ("{{{name}}}{{{name}}}", "{Ada}{Ada}"),
        ("a {{{name}}} and {{name}}", "a {Ada} and Ada"),
        ("{ {{name}} }", "{ Ada }"),
        (r"\{{{{name}}\}}", "{{Ada}}"),
    ],
)
def test_a_single_brace_next_to_a_group_needs_no_escape(text: str, rendered: str) -> None:
    """R7.52: a single brace is literal text, right before or after a group too."""
    check_template(text, "persona")
    assert render([Section("persona", text)], VARIABLES) == rendered


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{{{{name}}}}", "a lone '{{' at character 0"),
        ("{{{{name}}", "a lone '{{' at character 0"),
        ("{{name}}}}", "a lone '}}' at character 8"),
        ("{{{ name", "a lone '{{' at character 0"),
        ("{{{two words}}}", "malformed variable group '{{two words}}'"),
        ("{{{}}}", "malformed variable group '{{}}'"),
        (r"\{{{name}}}", "a lone '}}' at character 8"),
    ],
)
def test_a_double_brace_beside_a_group_is_still_an_error(text: str, problem: str) -> None:
    """R7.52: only one brace beside a group is literal; a second makes a lone ``{{`` or
    ``}}``, which is an error (``\\{{`` and ``\\}}`` write them)."""
    with pytest.raises(PromptError, match=problem):
        check_template(text, "persona")


def test_agent_options_accept_a_group_between_single_braces() -> None:
    """docs/hooks.md: ``system_prompt`` is checked when given; a single brace passes."""
    options = retinue.AgentOptions(system_prompt=r"Sign as \textbf{{{name}}}.")
    assert options.system_prompt == r"Sign as \textbf{{{name}}}."
