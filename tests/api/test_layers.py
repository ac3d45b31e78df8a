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


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("retinue."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("retinue."):
                    found.add(alias.name.split(".")[1])
    return found


def test_layers_imports_point_downward() -> None:
    """No subpackage imports one above it; nothing in src imports the testing kit."""
    violations = []
    for package, layer in LAYERS.items():
        for path in (SOURCE / package).rglob("*.py"):
            for imported in _imported_packages(path):
                if imported == package or imported.startswith("_"):
                    continue
                if imported == "testing" and package != "cli":
                    violations.append(f"{path.name} ({package}) imports retinue.testing")
                elif LAYERS.get(imported, 0) > layer:
                    violations.append(f"{path.relative_to(SOURCE)} imports retinue.{imported}")
    assert violations == []
