"""Read a Google-style docstring: the description and the ``Args:`` entries."""

from __future__ import annotations

import re

__all__ = ["parse_docstring"]

_SECTION = re.compile(
    r"^(args|arguments|parameters|params|keyword args|keyword arguments|other parameters|"
    r"returns?|yields?|raises|examples?|notes?|attributes|see also|warnings?|todo|references)"
    r"\s*:\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a cleaned docstring into its description and per-argument descriptions.

    The description is the text before the first section header; argument
    descriptions come from ``Args:`` (or ``Arguments:``, ``Parameters:``),
    one entry per ``name: text`` or ``name (type): text`` line, with more
    indented continuation lines joined by spaces. Pure; never raises.
    """
    if not doc:
        return "", {}
    lines = doc.expandtabs().splitlines()
    head: list[str] = []
    arguments: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _is_header(lines[index]):
        head.append(lines[index])
        index += 1
    while index < len(lines):
        section = lines[index].strip().rstrip(":").strip().lower()
        body, index = _section_body(lines, index + 1)
        if section in _ARG_SECTIONS:
            arguments.update(_entries(body))
    return "\n".join(head).strip(), arguments


def _is_header(line: str) -> bool:
    return _indent(line) == 0 and _SECTION.match(line) is not None


def _section_body(lines: list[str], start: int) -> tuple[list[str], int]:
    """Return the indented lines of a section and the index just past them."""
    index = start
    while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > 0):
        index += 1
    return lines[start:index], index


def _entries(body: list[str]) -> dict[str, str]:
    content = [line for line in body if line.strip()]
    if not content:
        return {}
    base = min(_indent(line) for line in content)
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in content:
        match = _ENTRY.match(line.strip()) if _indent(line) == base else None
        if match is not None:
            current = entries.setdefault(match["name"], [])
            if match["text"]:
                current.append(match["text"].strip())
        elif current is not None:
            current.append(line.strip())
    return {name: " ".join(words) for name, words in entries.items()}
