"""A pattern's ``$`` ends the text, as JSON Schema's does, whatever inline flags, scoped
groups, classes, escapes and comments surround it; under the multiline flag it ends each
line, as the pattern asks (R9.3, R9.7).

Each pattern is drawn twice over: as written, and as its oracle, with every ``$`` that
ends the text written ``\\Z`` by the generator, which knows the flags in force where it put
it. The tool's check must agree with Python's ``re.search`` of the oracle on every string.
"""

from __future__ import annotations

import re

import hypothesis.strategies as st
from hypothesis import assume, example, given

from retinue._lossless import freeze_json
from retinue.tools import Tool

Piece = tuple[str, str]  # (as written, the oracle)


def _same(*texts: str) -> st.SearchStrategy[Piece]:
    return st.sampled_from([(text, text) for text in texts])


def _atoms(*, multiline: bool, verbose: bool) -> st.SearchStrategy[Piece]:
    end = st.just(("$", "$" if multiline else "\\Z"))
    literal = _same("a", "b", "\\n", ".", "\\$", "\\\\", "[$a]", "[]$]", "[^$\\n]", "[ #$]")
    comments = _same("(?#$)", "(?#[)", "(?#\\)$)")
    # Outside the verbose flag a space and "#" are characters; inside it, one starts a comment.
    spaced = _same(" # $ [\n", " ") if verbose else _same(" ", "#")
    quantified = st.tuples(literal, _same("", "?", "*", "+")).map(
        lambda pair: (pair[0][0] + pair[1][0], pair[0][1] + pair[1][1])
    )
    return end | _same("^") | quantified | comments | spaced


def _sequence(*, multiline: bool, verbose: bool, depth: int) -> st.SearchStrategy[Piece]:
    pieces = _atoms(multiline=multiline, verbose=verbose)
    if depth > 0:
        pieces = pieces | _group(multiline=multiline, verbose=verbose, depth=depth - 1)
    return st.lists(pieces, max_size=5).map(
        lambda parts: ("".join(p[0] for p in parts), "".join(p[1] for p in parts))
    )


# A group's opening, and the flags it turns on and off for what it holds.
_OPENINGS = [
    ("(", "", ""),
    ("(?:", "", ""),
    ("(?=", "", ""),
    ("(?m:", "m", ""),
    ("(?-m:", "", "m"),
    ("(?x:", "x", ""),
    ("(?-x:", "", "x"),
    ("(?i:", "", ""),
    ("(?s-i:", "", ""),
    ("(?mx:", "mx", ""),
    ("(?i-mx:", "", "mx"),
]


@st.composite
def _group(draw: st.DrawFn, *, multiline: bool, verbose: bool, depth: int) -> Piece:
    opening, on, off = draw(st.sampled_from(_OPENINGS))
    multiline = ("m" in on or multiline) and "m" not in off
    verbose = ("x" in on or verbose) and "x" not in off
    inner = _sequence(multiline=multiline, verbose=verbose, depth=depth)
    first, second = draw(inner), draw(inner)
    alternative = draw(st.booleans())
    written = first[0] + ("|" + second[0] if alternative else "")
    oracle = first[1] + ("|" + second[1] if alternative else "")
    return f"{opening}{written})", f"{opening}{oracle})"


@st.composite
def patterns(draw: st.DrawFn) -> Piece:
    flags = "".join(sorted(draw(st.sets(st.sampled_from("aimsx")))))
    body = draw(_sequence(multiline="m" in flags, verbose="x" in flags, depth=2))
    prefix = f"(?{flags})" if flags else ""
    return prefix + body[0], prefix + body[1]


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


@given(patterns(), st.lists(st.text("ab\n$# ", max_size=5), min_size=1, max_size=8))
@example(("(?i)^a$", "(?i)^a\\Z"), ["a"])
@example(("(?x)^a # $\n$", "(?x)^a # $\n\\Z"), ["a"])
def test_a_pattern_matches_as_its_oracle_on_every_string(pattern: Piece, texts: list[str]) -> None:
    """R9.3: the tool refuses exactly the strings the oracle finds no match in, a string
    with a newline added at its end included."""
    written, oracle = pattern
    assume(_compiles(written))
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": written}}}
    check = Tool("t", "A tool.", schema, lambda **_: None).check_arguments
    for text in texts + [text + "\n" for text in texts]:
        taken = check(freeze_json({"x": text})) is None
        assert taken is (re.search(oracle, text) is not None), (written, oracle, text)
