"""The Python and TOML examples of README.md and docs/*.md, checked against the package.

A complete program (one that ends in ``trio.run(main)``) runs as written and
prints what the text after it says; a pytest example (one defining ``async def
test_...``) passes as pytest-trio runs it; every other fragment compiles, and each
``retinue`` name it uses exists, so a rename cannot leave an example behind.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import io
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.testing import Reply, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (
    "README.md",
    "docs/events.md",
    "docs/hooks.md",
    "docs/providers.md",
    "docs/stores.md",
    "docs/testing.md",
)

# A fence, its text, and the prose up to the next fence or heading (where "It prints" is).
_FENCED = re.compile(r"^```(\w+)\n(.*?)^```\n(.*?)(?=^```|^#|\Z)", re.DOTALL | re.MULTILINE)

VIRTUAL_DEADLINE = 60.0


def _examples(language: str) -> list[tuple[str, str, str]]:
    """Every *language* block of the documents: (where, code, the prose after it)."""
    found = []
    for document in DOCUMENTS:
        text = (ROOT / document).read_text(encoding="utf-8")
        for match in _FENCED.finditer(text):
            if match[1] == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{document}:{line}", match[2], match[3]))
    return found


PROGRAMS = [example for example in _examples("python") if "trio.run(main)" in example[1]]
TESTS = [
    example
    for example in _examples("python")
    if "async def test_" in example[1] and example not in PROGRAMS
]
FRAGMENTS = [
    example for example in _examples("python") if example not in PROGRAMS and example not in TESTS
]


def _ids(examples: list[tuple[str, str, str]]) -> list[str]:
    return [where for where, _, _ in examples]


def _promised_output(prose: str) -> list[str] | None:
    """The lines "It prints `a`, then `b`" promises, if the prose says what is printed."""
    promise = re.search(r"It prints ((?:`[^`]+`(?:, then )?)+)", prose)
    if promise is None:
        return None
    return re.findall(r"`([^`]+)`", promise[1])


def _run_on_virtual_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the program's own ``trio.run(main)`` run on an autojumping clock under a
    virtual deadline: a program that hangs fails instead."""
    real_run = trio.run

    def run(main: Callable[[], Awaitable[object]]) -> object:
        async def bounded() -> object:
            with trio.fail_after(VIRTUAL_DEADLINE):
                return await main()

        return real_run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))

    monkeypatch.setattr(trio, "run", run)


@pytest.mark.parametrize(("where", "code", "prose"), PROGRAMS, ids=_ids(PROGRAMS))
def test_a_complete_program_prints_what_its_text_says(
    where: str, code: str, prose: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """It runs as written, in an empty directory, and prints the lines the text promises."""
    monkeypatch.chdir(tmp_path)
    _run_on_virtual_clock(monkeypatch)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "__main__"})
    promised = _promised_output(prose)
    # The README's program says what it prints in comments: checked on its own below.
    assert promised is not None or where.startswith("README.md:")
    if promised is not None:
        assert printed.getvalue().splitlines() == promised


def test_the_readme_program_prints_the_id_its_comment_shows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The README's first program prints ``writer-session-<uuid4>``, then a completed turn."""
    [(where, code, _)] = [example for example in PROGRAMS if example[0].startswith("README")]
    assert "print(agent.id)  # writer-session-<uuid4>" in code
    monkeypatch.chdir(tmp_path)
    _run_on_virtual_clock(monkeypatch)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "__main__"})
    agent_id, result, _events = printed.getvalue().splitlines()
    assert re.fullmatch(r"writer-session-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", agent_id)
    assert result.startswith("completed ")


@pytest.mark.parametrize(("where", "code", "prose"), TESTS, ids=_ids(TESTS))
def test_a_pytest_example_passes_as_pytest_trio_runs_it(
    where: str, code: str, prose: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each ``async def test_...`` it defines passes in a trio run, on an autojumping
    ``MockClock`` when it takes ``autojump_clock``, as pytest-trio's fixture gives it."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, where, "exec"), namespace)
    tests = [
        value
        for name, value in namespace.items()
        if name.startswith("test_") and inspect.iscoroutinefunction(value)
    ]
    assert tests, f"{where}: no async test function"
    for test in tests:
        parameters = inspect.signature(test).parameters
        assert set(parameters) <= {"autojump_clock"}, f"{where}: {test.__name__} {parameters}"
        clock = trio.testing.MockClock(autojump_threshold=0)
        given = {"autojump_clock": clock} if parameters else {}
        trio.run(functools.partial(test, **given), clock=clock if parameters else None)


@pytest.mark.parametrize(("where", "code", "prose"), FRAGMENTS, ids=_ids(FRAGMENTS))
def test_a_fragment_names_only_what_the_package_has(where: str, code: str, prose: str) -> None:
    """It compiles (``await`` at the top, as in a body it stands for), every ``retinue``
    module, import and attribute it names exists, and each call of one takes the
    keywords it is given."""
    tree = ast.parse(code, where, feature_version=(3, 11))
    compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retinue"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{where}: {node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.Attribute) and _dotted(node).startswith("retinue."):
            _resolve(_dotted(node), where)
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        callee = _callee(call.func, where)
        if callee is not None:
            keywords = {keyword.arg: None for keyword in call.keywords if keyword.arg}
            inspect.signature(callee).bind_partial(**keywords)


def _callee(func: ast.expr, where: str) -> Any:
    """What a call names: a ``retinue.`` attribute chain, or a name some example of the
    same document imports from ``retinue`` (fragments lean on each other's imports)."""
    dotted = _dotted(func)
    if dotted.startswith("retinue."):
        return _resolve(dotted, where)
    document = where.rpartition(":")[0]
    return _DOCUMENT_IMPORTS[document].get(dotted)


def _imports_of(document: str) -> dict[str, Any]:
    """The names the document's examples import from ``retinue`` modules."""
    names: dict[str, Any] = {}
    for where, code, _ in _examples("python"):
        if not where.startswith(f"{document}:"):
            continue
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retinue"):
                module = importlib.import_module(node.module or "")
                names.update({alias.name: getattr(module, alias.name) for alias in node.names})
    return names


_DOCUMENT_IMPORTS = {document: _imports_of(document) for document in DOCUMENTS}


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for an attribute chain on a name, else ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _resolve(dotted: str, where: str) -> Any:
    """Find *dotted* (``retinue.providers.mock.EchoPolicy``), importing submodules on the way."""
    value: Any = retinue
    path = "retinue"
    for part in dotted.split(".")[1:]:
        path = f"{path}.{part}"
        if not hasattr(value, part):
            with contextlib.suppress(ModuleNotFoundError):
                importlib.import_module(path)
        assert hasattr(value, part), f"{where}: {path}"
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(("where", "text", "prose"), _examples("toml"), ids=_ids(_examples("toml")))
def test_a_configuration_example_loads(where: str, text: str, prose: str, tmp_path: Path) -> None:
    """The TOML example is a configuration :func:`retinue.load_config` accepts."""
    path = tmp_path / "retinue.toml"
    path.write_text(text, encoding="utf-8")
    config = retinue.load_config(path)
    assert config.agents, where


@pytest.mark.parametrize(("where", "text", "prose"), _examples("toml"), ids=_ids(_examples("toml")))
async def test_each_configured_agent_with_a_model_answers(
    where: str, text: str, prose: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An agent the example configures with a model completes a turn: its settings (a
    system prompt's variables among them) are ones a turn can run with (R13.2)."""
    path = tmp_path / "retinue.toml"
    path.write_text(text, encoding="utf-8")
    config = retinue.load_config(path)
    with_model = [entry for entry in config.agents if entry.model is not None]
    assert with_model, where
    model = ScriptedModel([Reply("done") for _ in with_model])
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with retinue.open_runtime(models=model, config=config) as rt:
            agents = [agent for agent in rt.agents if agent.options.model is not None]
            assert len(agents) == len(with_model), where
            for agent in agents:
                result = await agent.ask("hello")
                assert result.reason.kind == "completed", (where, agent.id, result.reason)


def test_every_complete_program_passes_mypy(tmp_path: Path) -> None:
    """A user's type checker accepts what the docs show: a store written as the page
    writes one is a ``SessionStore`` to ``open_runtime(store=...)``, and so on."""
    for index, (_where, code, _prose) in enumerate(PROGRAMS):
        (tmp_path / f"example_{index}.py").write_text(code, encoding="utf-8")
    # A user's own settings, not this project's strict ones (whose examples are terse).
    (tmp_path / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    # In a process of its own: mypy raises the interpreter's recursion limit for good,
    # which would move where the depth tests of this run hit theirs.
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            f"--config-file={tmp_path / 'mypy.ini'}",
            "--no-incremental",
            f"--cache-dir={tmp_path / 'cache'}",
            *(str(path) for path in sorted(tmp_path.glob("example_*.py"))),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = checked.stdout
    for index, (at, _, _) in enumerate(PROGRAMS):
        report = report.replace(f"example_{index}.py", f"example_{index}.py ({at})")
    assert checked.returncode == 0, report + checked.stderr
