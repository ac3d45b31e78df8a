"""The public surface: sorted, documented, final, reported under public module names."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from typing import Protocol

import pytest

PUBLIC_PACKAGES = [
    "retinue",
    "retinue.actors",
    "retinue.config",
    "retinue.hooks",
    "retinue.loop",
    "retinue.mailbox",
    "retinue.prompt",
    "retinue.providers",
    "retinue.session",
    "retinue.stores",
    "retinue.supervisors",
    "retinue.testing",
    "retinue.tools",
]


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    rank = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return rank, name


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_exports_all_is_sorted_and_resolvable(name: str) -> None:
    """Every public package has a sorted ``__all__`` whose names all resolve."""
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    for item in exported:
        assert hasattr(module, item), f"{name}.{item} is missing"


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_exports_have_docstrings(name: str) -> None:
    """Every exported class and function has a docstring."""
    module = importlib.import_module(name)
    assert module.__doc__, f"{name} has no module docstring"
    for item in module.__all__:
        value = getattr(module, item)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name}.{item} has no docstring"


def test_top_level_surface_is_small() -> None:
    """The top level stays near 40 names."""
    import retinue

    assert len(retinue.__all__) <= 45


def test_public_classes_are_final_or_protocols() -> None:
    """Exported concrete classes are final; extension happens through protocols."""
    import retinue

    for item in retinue.__all__:
        value = getattr(retinue, item)
        if not inspect.isclass(value) or issubclass(value, BaseException):
            continue
        if Protocol in getattr(value, "__mro__", ()) or getattr(value, "_is_protocol", False):
            continue
        assert getattr(value, "__final__", False), f"retinue.{item} is not @final"


def test_import_retinue_imports_no_provider_sdk() -> None:
    """``import retinue`` loads neither the openai nor the anthropic SDK."""
    code = (
        "import sys, retinue, retinue.providers, retinue.testing;"
        "print(any(m == 'openai' or m.startswith(('openai.', 'anthropic')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_retinue_does_not_import_testing_kit() -> None:
    """``import retinue`` does not import ``retinue.testing``."""
    code = "import sys, retinue; print('retinue.testing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
