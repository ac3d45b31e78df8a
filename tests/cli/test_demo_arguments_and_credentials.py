"""``retinue demo`` before its run: bad arguments are usage errors naming them, and a provider it
cannot use (no key, a bad base URL variable) ends it in one line, while any credentials the
Anthropic client finds, or a base URL given, let it start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from retinue.cli import _demo_models, main
from retinue.cli._demo_options import base_url_variable_problem
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel
from tests.cli._demo_kit import demo_args
from tests.helpers import ANTHROPIC_CREDENTIAL_VARIABLES


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--store", "memory", "--agents", "0"], "argument --agents: must be at least 1, got 0"),
        (["--store", "memory", "--turns", "-1"], "argument --turns: must be at least 1, got -1"),
        (["--store", "bogus"], "argument --store: invalid store 'bogus'"),
        (["--store", "jsonl:"], "argument --store: invalid store 'jsonl:'"),
        (["--store", "redis:localhost"], "argument --store: unknown store kind 'redis'"),
        (
            ["--store", "sqlite:runs/a\0b.db"],
            "argument --store: sqlite store path 'runs/a\\x00b.db' contains a NUL character",
        ),
        (
            ["--store", "jsonl:\0"],
            "argument --store: jsonl store path '\\x00' contains a NUL character",
        ),
        (
            ["--store", "memory:x"],
            "argument --store: invalid store 'memory:x': memory takes no location",
        ),
        (["--store", "memory", "--latency", "inf"], "argument --latency: must be finite, got inf"),
        (["--store", "memory", "--latency", "nan"], "argument --latency: must be finite, got nan"),
        (["--store", "memory", "--latency", "-1"], "argument --latency: must be >= 0, got -1"),
        (
            ["--store", "memory", "--latency", "soon"],
            "argument --latency: must be a number of seconds, got 'soon'",
        ),
        (
            ["--store", "memory", "--agents", "1", "--base-url", "http://127.0.0.1:1/v1"],
            "argument --base-url: only --provider openai or anthropic uses it, not mock",
        ),
        (
            ["--store", "memory", "--agents", "1", "--provider", "scripted", "--model", "m"],
            "argument --model: only --provider openai or anthropic uses it, not scripted",
        ),
        (
            ["--store", "memory", "--provider", "openai", "--model", ""],
            "argument --model: must not be empty, got ''",
        ),
        (
            ["--store", "memory", "--provider", "anthropic", "--base-url", " "],
            "argument --base-url: must not be empty, got ' '",
        ),
        (
            ["--store", "memory", "--provider", "openai", "--base-url", "localhost:8000/v1"],
            "argument --base-url: must be an http:// or https:// URL, got 'localhost:8000/v1'",
        ),
        (
            ["--store", "memory", "--provider", "anthropic", "--base-url", "https:///v1"],
            "argument --base-url: must be an http:// or https:// URL, got 'https:///v1'",
        ),
        (
            ["--store", "memory", "--provider", "openai", "--base-url", "ftp://example.com/v1"],
            "argument --base-url: must be an http:// or https:// URL, got 'ftp://example.com/v1'",
        ),
        (
            ["--store", "memory", "--provider", "openai", "--base-url", "http://h:99999/v1"],
            "argument --base-url: must be an http:// or https:// URL, got 'http://h:99999/v1'",
        ),
        (
            ["--store", "memory", "--provider", "anthropic", "--base-url", "http://exa mple.com"],
            (
                "argument --base-url: must be an http:// or https:// URL without whitespace "
                "or control characters, got 'http://exa mple.com'"
            ),
        ),
        (
            ["--store", "memory", "--provider", "openai", "--base-url", "h/v1?key=sk-1"],
            "argument --base-url: must be an http:// or https:// URL, got 'h/v1?...'",
        ),
        (
            ["--store", "memory", "--provider", "anthropic", "--base-url", "http://h/?key=sk-1"],
            (
                "argument --base-url: must be an http:// or https:// URL without a query, "
                "which the request's path would follow, got 'http://h/?...'"
            ),
        ),
        (
            ["--store", "memory", "--provider", "openai", "--base-url", "http://u:pw@h:99999"],
            "argument --base-url: must be an http:// or https:// URL, got 'http://...@h:99999'",
        ),
        (
            ["--store", "memory", "--provider", "anthropic", "--latency", "1"],
            "argument --latency: only --provider mock or scripted uses it, not anthropic",
        ),
    ],
)
def test_demo_refuses_bad_arguments_before_it_starts(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input gets a usage error naming the argument, not a traceback from inside the run;
    a base URL's query and user information, which may hold a key, are shown as ``...``,
    as the adapters show them."""
    with pytest.raises(SystemExit) as caught:
        main(["demo", "--no-live", *argv])
    assert caught.value.code == 2
    assert complaint in capsys.readouterr().err


def test_the_demo_lists_memory_among_the_stores_it_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad --store names every value the demo takes; the sessions commands, which cannot
    read a memory store, do not offer it."""
    with pytest.raises(SystemExit):
        main(["demo", "--no-live", "--store", "foo"])
    demo_err = capsys.readouterr().err
    assert "invalid store 'foo': use sqlite:PATH, jsonl:DIR, postgres:DSN or memory\n" in demo_err
    with pytest.raises(SystemExit):
        main(["sessions", "list", "--store", "foo"])
    sessions_err = capsys.readouterr().err
    assert sessions_err.endswith(
        "invalid store 'foo': use sqlite:PATH, jsonl:DIR or postgres:DSN\n"
    )


@pytest.mark.parametrize("variables", [{}, {"OPENAI_ADMIN_KEY": "admin"}], ids=["none", "admin"])
def test_demo_reports_a_provider_it_cannot_use_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variables: dict[str, str]
) -> None:
    """A missing API key ends the demo with status 1 and one line naming the problem; an
    admin key, which authenticates no model request, is no API key."""
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    argv = ["demo", "--provider", "openai", "--store", "memory", "--no-live", "--agents", "1"]
    status = main([*argv, "--turns", "1"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("retinue demo: Missing credentials: ")
    assert "OPENAI_API_KEY" in err
    assert err.count("\n") == 1


def test_demo_keeps_its_errors_off_standard_output_when_standard_error_is_closed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started with standard error closed (``2>&-``), a demo that cannot start exits 1 and leaves
    standard output alone: its error line does not go there."""
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stderr", None)
    assert main(["demo", "--provider", "openai", "--store", "memory", "--no-live"]) == 1
    assert capsys.readouterr().out == ""


def _without_anthropic_credentials(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Leave the SDK nothing to find: no variables, and a home without a profile on disk."""
    for name in ANTHROPIC_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))


def test_demo_reports_missing_anthropic_credentials_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Like OpenAI, a missing Anthropic key stops the demo before it starts: status 1, one line."""
    _without_anthropic_credentials(monkeypatch, tmp_path)
    argv = ["demo", "--provider", "anthropic", "--store", "memory", "--no-live", "--agents", "1"]
    status = main([*argv, "--turns", "1"])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("retinue demo: ")
    assert "ANTHROPIC_API_KEY" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("provider", "variable", "url"),
    [
        ("openai", "OPENAI_BASE_URL", "::8000/v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "localhost:8000"),
        ("openai", "OPENAI_BASE_URL", "https://api.example.com /v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "http://256.1.1.1"),
    ],
)
def test_demo_names_a_base_url_variable_that_is_not_a_url(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    variable: str,
    url: str,
) -> None:
    """The base URL the environment gives, in place of --base-url, is checked as that
    option is, before the run, and named by its variable: not a URL parser's bare
    complaint, nor every turn failing on it."""
    monkeypatch.setenv(variable, url)
    monkeypatch.setenv(f"{provider.upper()}_API_KEY", "key")
    argv = ["demo", "--provider", provider, "--store", "memory", "--no-live", "--agents", "1"]
    status = main([*argv, "--turns", "1"])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith(f"retinue demo: {variable} must be an http:// or https:// URL")
    assert err.endswith(f", got {url!r}\n")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("provider", "variable"),
    [("openai", "OPENAI_BASE_URL"), ("anthropic", "ANTHROPIC_BASE_URL")],
)
async def test_demo_takes_an_empty_base_url_variable_as_unset(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    """``VARIABLE=`` clears the base URL rather than naming a bad one: the service's own is used."""
    monkeypatch.setenv(variable, "")
    monkeypatch.setenv(f"{provider.upper()}_API_KEY", "key")
    args = demo_args(provider=provider)
    assert base_url_variable_problem(args) is None
    async with _demo_models.open_model(args) as (model, _model_name):
        assert isinstance(model, OpenAIModel | AnthropicModel)
        assert model.base_url.startswith(f"https://api.{provider}.com")


@pytest.mark.parametrize(
    "variables",
    [
        {"ANTHROPIC_PROFILE": "dev"},
        {"ANTHROPIC_AUTH_TOKEN": "token"},
        {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    ],
)
async def test_demo_starts_with_any_credentials_the_anthropic_client_finds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variables: dict[str, str]
) -> None:
    """The SDK's own rules decide: a profile, a bearer token, or a local server (which the
    adapter gives a placeholder key) is enough, not only ANTHROPIC_API_KEY."""
    _without_anthropic_credentials(monkeypatch, tmp_path)
    profile = tmp_path / ".config" / "anthropic" / "configs" / "dev.json"
    profile.parent.mkdir(parents=True)
    profile.write_text('{"authentication": {"type": "user_oauth"}}')
    profile.chmod(0o600)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    async with _demo_models.open_model(demo_args(provider="anthropic")) as (model, model_name):
        assert model_name == "claude-haiku-4-5"
        assert type(model).__name__ == "AnthropicModel"


async def test_demo_points_anthropic_at_the_base_url_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--base-url reaches the Anthropic client too, which then needs no key for a local server."""
    _without_anthropic_credentials(monkeypatch, tmp_path)
    args = demo_args(provider="anthropic", base_url="http://127.0.0.1:9")
    async with _demo_models.open_model(args) as (model, _model_name):
        assert isinstance(model, AnthropicModel)
        assert str(model.base_url).startswith("http://127.0.0.1:9")


def test_demo_names_a_count_that_is_not_an_integer(capsys: pytest.CaptureFixture[str]) -> None:
    """A non-numeric count is a usage error saying what is expected, not a helper's name."""
    with pytest.raises(SystemExit) as caught:
        main(["demo", "--no-live", "--store", "memory", "--agents", "abc"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument --agents: must be an integer >= 1, got 'abc'" in err
    assert "_at_least_one" not in err


@pytest.mark.parametrize(
    ("base_url", "told"),
    [
        (None, "or choose a profile with ANTHROPIC_PROFILE"),
        ("https://api.deepseek.com/anthropic", "profile serves Anthropic's own API alone"),
        ("variable", "profile serves Anthropic's own API alone"),
    ],
    ids=["anthropic", "deepseek", "deepseek-variable"],
)
def test_demo_without_anthropic_credentials_says_where_a_profile_serves(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    base_url: str | None,
    told: str,
) -> None:
    """Without a key, the demo's refusal points to a profile only for Anthropic's own API:
    another provider's API is never sent a profile's token, so choosing one would not help."""
    for name in ANTHROPIC_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    if base_url == "variable":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://api.deepseek.com/anthropic")
        base_url = None
    argv = ["demo", "--provider", "anthropic", "--store", "memory", "--no-live", "--agents", "1"]
    status = main([*argv, *(["--base-url", base_url] if base_url else []), "--turns", "1"])
    err = capsys.readouterr().err
    assert (status, err.count("\n")) == (1, 1)
    assert err.startswith("retinue demo: Missing credentials: ")
    assert told in err
