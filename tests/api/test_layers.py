"""Imports point one way (DESIGN 2): lower layers never import higher ones."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "retinue"

# A package may import only packages of a lower or equal layer.
LAYERS = {
    "session": 1,
    "mailbox": 1,
    "hooks": 1,
    "prompt": 1,
    "providers": 1,
    "tools": 2,
    "stores": 2,
    "loop": 3,
    "actors": 4,
    "supervisors": 5,
    "cli": 6,
    "testing": 6,
}


def _package_of(path: Path) -> str:
    """The dotted package a relative import in *path* starts from (``retinue.tools``)."""
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1])


def _imported_packages(source: str, package: str) -> set[str]:
    """The ``retinue`` subpackages *source* imports, relative imports resolved from *package*.

    ``from X import name`` counts ``X.name`` too, since *name* may be a module
    (``from .. import testing``, ``from retinue import testing``).
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                assert base, f"relative import above the top package in {package}"
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            modules = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(module.split(".")[1] for module in modules if module.startswith("retinue."))
    return found


def test_layers_reads_relative_and_absolute_imports() -> None:
    """The import reader resolves relative imports, so ``from ..loop import x`` cannot slip past."""
    source = (
        "from ..loop import _state\n"
        "from .. import testing\n"
        "from . import _body\n"
        "from ._execution import run\n"
        "from retinue import stores\n"
        "import retinue.hooks\n"
        "def later():\n"
        "    from ..supervisors import _runtime\n"
    )
    assert _imported_packages(source, "retinue.tools") == {
        "loop",
        "testing",
        "tools",
        "stores",
        "hooks",
        "supervisors",
    }
    # In a package's __init__.py the package itself is where ``.`` starts.
    assert _package_of(SOURCE / "tools" / "__init__.py") == "retinue.tools"
    assert _package_of(SOURCE / "tools" / "_body.py") == "retinue.tools"


def test_layers_imports_point_downward() -> None:
    """No subpackage imports one above it; nothing in src imports the testing kit."""
    violations = []
    for package, layer in LAYERS.items():
        for path in (SOURCE / package).rglob("*.py"):
            for imported in _imported_packages(path.read_text(), _package_of(path)):
                if imported == package or imported.startswith("_"):
                    continue
                if imported == "testing" and package != "cli":
                    violations.append(f"{path.name} ({package}) imports retinue.testing")
                elif LAYERS.get(imported, 0) > layer:
                    violations.append(f"{path.relative_to(SOURCE)} imports retinue.{imported}")
    assert violations == []
