"""Read a docstring's description and parameter entries: Google, NumPy or Sphinx style."""

from __future__ import annotations

import re

__all__ = ["parse_docstring"]

_SECTION = re.compile(
    r"^(args|arguments|parameters|params|keyword args|keyword arguments|other parameters|"
    r"returns?|yields?|raises|examples?|notes?|attributes|see also|warnings?|todo|references)"
    r"\s*:\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS = {
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
    "other parameters",
}  # fmt: skip
# A NumPy section header is a name underlined with dashes.
_UNDERLINE = re.compile(r"^-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^(?P<names>\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
# A Sphinx field: ``:param name: text`` or ``:param type name: text``. A role that opens a line
# (``:class:`Forecast` caches``) is text: its second colon is followed by a backtick.
_FIELD = re.compile(r"^:(?P<kind>\w+)(?P<rest>(?:\s[^:]*)?):(?!\S)\s*(?P<text>.*)$")
_PARAM_FIELDS = {"param", "parameter", "arg", "argument", "key", "keyword"}
# Only Sphinx's own fields end the description: a line of text may open with a word between
# colons too, and taking it for a field would cut the description and lose the ``Args:``.
_FIELDS = _PARAM_FIELDS | {
    "type", "raises", "raise", "except", "exception", "var", "ivar", "cvar", "vartype",
    "returns", "return", "rtype", "yields", "yield", "ytype", "meta",
}  # fmt: skip
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a cleaned docstring into its description and per-argument descriptions.

    The description is the text before the first section header or field.
    Argument descriptions come from Google's ``Args:`` (or ``Arguments:``,
    ``Parameters:``) entries, ``name: text`` or ``name (type): text``; from
    NumPy's underlined ``Parameters`` section, ``name : type`` over indented
    text; or from Sphinx's ``:param name: text`` fields. More indented
    continuation lines are joined by spaces. Pure; never raises.
    """
    if not doc:
        return "", {}
    lines = _first_section_indented(doc.expandtabs().splitlines())
    index = 0
    while index < len(lines) and not _starts_sections(lines, index):
        index += 1
    head = "\n".join(lines[:index]).strip()
    if index < len(lines) and _is_numpy_header(lines, index):
        # An underlined heading may be prose (Markdown) above a Google ``Args:``.
        return head, _google_arguments(lines, index) | _numpy_arguments(lines, index)
    if index < len(lines) and _opens_fields(lines[index]):
        return head, _sphinx_arguments(lines[index:])
    return head, _google_arguments(lines, index)


def _first_section_indented(lines: list[str]) -> list[str]:
    """*lines*, the entries of a section that opens the docstring indented below its header.

    ``inspect.cleandoc`` dedents the lines after the first by their own least
    indent: under an ``Args:`` on the first line, with no other section at its
    level, the entries come out at the level of the header, a level no entry is
    read at, so they are indented back below it. A paragraph below an arguments
    section, there being no summary above, is the description: it is moved to the
    top, the place a description is read from.
    """
    if not lines or not _is_header(lines[0]):
        return lines
    end = 1
    while end < len(lines) and not _starts_sections(lines, end) and not _prose_after(lines, end):
        end += 1
    body = lines[1:end]
    first = next((line for line in body if line.strip()), None)
    if first is None or _indent(first) > 0:
        return lines
    entries = [lines[0], *(f"    {line}" for line in body)]
    opens_arguments = lines[0].strip().rstrip(":").strip().lower() in _ARG_SECTIONS
    if end == len(lines) or _starts_sections(lines, end) or not opens_arguments:
        return [*entries, *lines[end:]]
    stop = end + 1
    while stop < len(lines) and not _starts_sections(lines, stop):
        stop += 1
    return [*lines[end + 1 : stop], "", *entries, *lines[stop:]]


def _prose_after(lines: list[str], index: int) -> bool:
    """Whether a blank line at *index* ends the entries: a paragraph at their level follows
    that no entry opens (a description written below the section)."""
    if lines[index].strip():
        return False
    following = next((line for line in lines[index + 1 :] if line.strip()), None)
    return following is not None and _indent(following) == 0 and not _ENTRY.match(following)


def _starts_sections(lines: list[str], index: int) -> bool:
    line = lines[index]
    return _is_header(line) or _is_numpy_header(lines, index) or _opens_fields(line)


def _opens_fields(line: str) -> bool:
    field = _FIELD.match(line)
    return field is not None and field["kind"] in _FIELDS


def _is_numpy_header(lines: list[str], index: int) -> bool:
    return (
        _indent(lines[index]) == 0
        and bool(lines[index].strip())
        and index + 1 < len(lines)
        and _UNDERLINE.match(lines[index + 1].strip()) is not None
    )


def _numpy_arguments(lines: list[str], index: int) -> dict[str, str]:
    arguments: dict[str, str] = {}
    while index < len(lines):
        section = lines[index].strip().lower()
        end = index + 2
        while end < len(lines) and not _is_numpy_header(lines, end):
            end += 1
        if section in _ARG_SECTIONS:
            arguments.update(_numpy_entries(lines[index + 2 : end]))
        index = end
    return arguments


def _numpy_entries(body: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    current: list[list[str]] = []
    for line in body:
        match = _NUMPY_ENTRY.match(line) if _indent(line) == 0 else None
        if match is not None:
            names = [name.strip().lstrip("*") for name in match["names"].split(",")]
            current = [entries.setdefault(name, []) for name in names]
        elif line.strip():
            for words in current:
                words.append(line.strip())
    return {name: " ".join(words) for name, words in entries.items()}


def _sphinx_arguments(lines: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        field = _FIELD.match(line.strip()) if _indent(line) == 0 else None
        if field is not None:
            words = field["rest"].split()
            current = None
            if field["kind"] in _PARAM_FIELDS and words:
                current = entries.setdefault(words[-1].lstrip("*"), [])
                if field["text"]:
                    current.append(field["text"].strip())
        elif current is not None and line.strip():
            current.append(line.strip())
    return {name: " ".join(words) for name, words in entries.items()}


def _google_arguments(lines: list[str], index: int) -> dict[str, str]:
    arguments: dict[str, str] = {}
    while index < len(lines):
        section = lines[index].strip().rstrip(":").strip().lower()
        body, index = _section_body(lines, index + 1)
        if section in _ARG_SECTIONS:
            arguments.update(_entries(body))
    return arguments


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
