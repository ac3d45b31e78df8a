"""Writing a configuration file, for the loop configuration tests."""

from __future__ import annotations

from pathlib import Path


def write(tmp_path: Path, text: str) -> Path:
    """Write *text* as ``retinue.toml`` under *tmp_path*."""
    path = tmp_path / "retinue.toml"
    path.write_text(text)
    return path
