"""Options of the ``retinue`` command itself: -v anywhere on the line, and --version."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from retinue.cli import _parser, main


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "demo"],
        ["demo", "-v"],
        ["demo", "--no-live", "--verbose"],
        ["-v", "sessions", "list"],
        ["sessions", "-v", "list"],
        ["sessions", "list", "-v"],
    ],
)
def test_verbose_is_taken_before_or_after_the_sub_command(argv: list[str]) -> None:
    """-v turns logging on wherever it is given: before the sub-command or among its options."""
    assert _parser().parse_args(argv).verbose is True


@pytest.mark.parametrize("argv", [["demo"], ["sessions", "list"]])
def test_without_verbose_logging_stays_off(argv: list[str]) -> None:
    """The sub-command's own -v, not given, leaves verbose off rather than unset."""
    assert _parser().parse_args(argv).verbose is False


def test_version_prints_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``retinue --version`` prints the version the package was installed as, and exits 0."""
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"retinue {importlib.metadata.version('retinue')}\n"


def test_a_missing_sessions_command_is_named_by_its_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``retinue sessions`` alone is a usage error listing the commands it takes, not the
    name of the attribute the parser stores the command in."""
    with pytest.raises(SystemExit) as caught:
        main(["sessions"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(
        "error: the following arguments are required: {list,show,export,import,replay,delete}\n"
    )
    assert "sessions_command" not in err


def test_a_missing_command_is_named_by_its_choices(capsys: pytest.CaptureFixture[str]) -> None:
    """``retinue`` alone is a usage error listing the commands it takes, as ``retinue
    sessions`` alone is, not the name of the attribute the parser stores the command in;
    so is a command it does not have."""
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: the following arguments are required: {demo,sessions}\n"
    )
    with pytest.raises(SystemExit):
        main(["bogus"])
    assert "error: argument {demo,sessions}: invalid choice: 'bogus'" in capsys.readouterr().err


def _help_text(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """What ``retinue`` prints for *argv* (a ``--help``), its whitespace folded; it exits 0."""
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_the_list_help_names_each_reason_a_session_is_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``retinue sessions list --help`` names each stored session ``list`` leaves out: a header it
    cannot read, one naming another session, one of a format version this build does not read,
    and an id whose JSONL file lies in two cwd buckets."""
    help_text = _help_text(capsys, ["sessions", "list", "--help"])
    assert (
        "A stored session left out, its header unreadable, naming another session or of a "
        "format version this build does not read, or its JSONL file in two cwd buckets (which "
        "show and export refuse), is named on stderr with the problem"
    ) in help_text


@pytest.mark.parametrize("command", ["show", "export", "replay"])
def test_a_sessions_command_help_says_what_its_id_is(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``retinue sessions show|export|replay --help`` says what the id argument names, not a bare
    ``id``."""
    help_text = _help_text(capsys, ["sessions", command, "--help"])
    assert "positional arguments: id the stored session's id" in help_text


def test_the_import_help_says_what_it_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    """``retinue sessions import --help`` says a log that does not load as written is refused,
    naming the file and line, and that nothing is then stored."""
    help_text = _help_text(capsys, ["sessions", "import", "--help"])
    assert "is refused, naming the file and line, and nothing is stored" in help_text


def test_the_export_help_says_a_record_out_of_seq_order_fails_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R11.8: ``retinue sessions export --help`` says that a stored record written whole out of
    seq order is no torn tail left out: the export fails naming its file and line."""
    help_text = _help_text(capsys, ["sessions", "export", "--help"])
    assert (
        "A record written whole out of seq order (a line repeated or left out by hand) is no "
        "torn tail: the export fails, naming its file and line, and writes nothing."
    ) in help_text


def test_the_demo_help_says_what_the_demo_does(capsys: pytest.CaptureFixture[str]) -> None:
    """``retinue demo --help`` describes the run (its tools, the steer and cancel, the table,
    the defaults), where it showed the options alone."""
    help_text = _help_text(capsys, ["demo", "--help"])
    assert "Run many agents concurrently" in help_text
    assert "embedded mock provider server" in help_text


@pytest.mark.parametrize("module", ["retinue", "retinue.cli"])
def test_python_dash_m_runs_the_command(module: str) -> None:
    """``python -m retinue`` (as ``python -m retinue.cli``) is the ``retinue`` command, for an
    environment whose scripts directory is not on the PATH."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, timeout=60, check=False
    )
    version = importlib.metadata.version("retinue")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"retinue {version}\n".encode(), b"")


def test_importing_the_main_modules_runs_nothing() -> None:
    """``retinue.__main__`` and ``retinue.cli.__main__`` run the command as programs only:
    imported (by a tool listing modules, say), they neither parse this process's arguments
    nor exit it."""
    done = subprocess.run(
        [sys.executable, "-c", "import retinue.__main__, retinue.cli.__main__", "demo", "--bad"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
