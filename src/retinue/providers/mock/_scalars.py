"""Scalar values: whether one meets a schema node's own keywords; numbers and strings drawn.

Numbers are drawn on a grid, the least common multiple of their steps, within
their bounds; strings are drawn from a ``pattern`` by a small sampler of
regular expressions. A value is judged by :mod:`retinue._jsonschema`, as the
tools' validator judges it, and numbers are read as their JSON text reads
(``0.3`` is a multiple of ``0.1``).
"""

from __future__ import annotations

import functools
import math
import random
import re
import string
from collections.abc import Iterator, Mapping
from fractions import Fraction

from retinue._jsonschema import (
    constraint_problem,
    decimal,
    is_array,
    is_number,
    is_type,
    json_key,
    schema_list,
    type_names,
)

__all__ = ["grid_window", "holds", "sample_strings", "step_grid"]

Schema = Mapping[str, object]

# keyword: (whether it bounds from below, whether exclusively)
_BOUNDS = {
    "minimum": (True, False),
    "exclusiveMinimum": (True, True),
    "maximum": (False, False),
    "exclusiveMaximum": (False, True),
}


def holds(value: object, node: Schema) -> bool:
    """Whether *value* meets *node*'s own type, choices, bounds, step, lengths and pattern.

    The sizes of an array or an object are left to the draw, which fits them.
    """
    names = type_names(node)
    if names is not None and not any(is_type(value, name) for name in names):
        return False
    if "const" in node and json_key(value) != json_key(node["const"]):
        return False
    if "enum" in node and json_key(value) not in {json_key(o) for o in schema_list(node["enum"])}:
        return False
    if is_array(value) or isinstance(value, Mapping):
        return True
    return constraint_problem(value, node, "") is None


# -- numbers on a grid -------------------------------------------------------------


def step_grid(nodes: list[Schema], *, integer: bool) -> Fraction:
    """The step every candidate is a multiple of: the least common multiple of the steps."""
    steps = [
        decimal(step)
        for node in nodes
        if is_number(step := node.get("multipleOf")) and step > 0 and math.isfinite(step)
    ]
    if integer:
        steps.append(Fraction(1))
    if not steps:
        return Fraction(1, 100)
    return functools.reduce(_lcm, steps)


def _lcm(a: Fraction, b: Fraction) -> Fraction:
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


def grid_window(nodes: list[Schema], grid: Fraction) -> tuple[int | None, int | None]:
    """The least and greatest multiples of *grid* (as counts of it) within every bound."""
    low: int | None = None
    high: int | None = None
    for node in nodes:
        for keyword, (below, exclusive) in _BOUNDS.items():
            limit = node.get(keyword)
            if not (is_number(limit) and math.isfinite(limit)):
                continue
            at = decimal(limit) / grid  # as the JSON text reads, as the step is
            if below:
                first = math.floor(at) + 1 if exclusive else math.ceil(at)
                low = first if low is None else max(low, first)
            else:
                last = math.ceil(at) - 1 if exclusive else math.floor(at)
                high = last if high is None else min(high, last)
    return low, high


# -- strings from a pattern ---------------------------------------------------------


def sample_strings(pattern: str, rng: random.Random, length: int) -> Iterator[str]:
    """Strings *pattern* matches: drawn freely, and stretched to *length* characters or more.

    An open quantifier (``*``, ``+``, ``{2,}``) repeats its least count plus a
    stretch; a draw with stretches 0 and 1 tells how much longer a stretch
    makes the string. Yields nothing for a pattern past the constructs
    :class:`_Sample` reads.
    """
    limit = 2 * length + 64

    def draw(stretch: int | None) -> str | None:
        return _Sample(pattern, rng, stretch, limit).draw()

    for stretch in (None, None, None, 0):
        sample = draw(stretch)
        if sample is None:
            return
        yield sample
    short, longer = (draw(stretch) or "" for stretch in (0, 1))
    growth = len(longer) - len(short)
    if growth > 0:
        need = max(0, -(-(length - len(short)) // growth))  # rounded up
        yield from (draw(stretch) or "" for stretch in (need, need + 1))
    # More draws, for a schema that refuses some matches (another oneOf member's).
    yield from (draw(None) or "" for _ in range(12))


# The characters samples are made of; a class of none of them gets the first it holds.
_ALPHABET = "".join(
    (string.ascii_letters, string.digits, " _-.,:;@/+#!?=&%*'\"()[]{}<>|\\^$~`", "éß€\t\n\r")
)
_QUANTIFIER = re.compile(r"[*+?]|\{(\d*)(,?)(\d*)\}")
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)


_MOST_REPEATS = 10_000
"""The largest least count of a quantifier that is drawn."""


class _UnsupportedError(Exception):
    """A construct :class:`_Sample` does not draw from."""


@functools.lru_cache(maxsize=256)
def _chars(source: str) -> str:
    """The characters of a sample alphabet that the one-character expression *source* matches."""
    try:
        matched = [c for c in _ALPHABET if re.fullmatch(source, c)]
    except re.error:
        raise _UnsupportedError(source) from None
    if not matched:  # a class of another script ([\u0400-\u04ff]): the first it holds
        matched = [next((chr(c) for c in range(0x10000) if re.fullmatch(source, chr(c))), "")]
    return "".join([c for c in matched if c.isprintable()] or matched)


class _Sample:
    """Draws one string a simple regular expression matches, parsing as it goes.

    It reads literals, escapes, ``[...]`` classes, ``.``, groups, ``|``,
    anchors and quantifiers; a lookaround, a backreference or an inline flag
    gives ``None``. An open quantifier repeats its least count plus *stretch*
    (``None``: zero to two more, drawn), but no more once a sequence is
    *limit* characters long: nested quantifiers multiply their counts.
    """

    def __init__(self, pattern: str, rng: random.Random, stretch: int | None, limit: int) -> None:
        self.pattern = pattern
        self.rng = rng
        self.stretch = stretch
        self.limit = limit
        self.at = 0

    def draw(self) -> str | None:
        try:
            text = self._alternatives()
        except (_UnsupportedError, IndexError, ValueError):
            return None
        return text if self.at == len(self.pattern) else None

    def _peek(self) -> str:
        return self.pattern[self.at : self.at + 1]

    def _alternatives(self) -> str:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self._sequence())
        return self.rng.choice(branches)

    def _sequence(self) -> str:
        parts: list[str] = []
        size = 0
        while self._peek() not in ("", "|", ")"):
            start = self.at
            text = self._atom()
            low, high = self._quantifier()
            end = self.at
            extra = self.rng.randint(0, 2) if self.stretch is None else self.stretch
            count = low + extra if high is None else min(high, low + extra)
            parts.append(text if count else "")
            size += len(parts[-1])
            for done in range(1, count):
                if done >= low and size > self.limit:
                    break
                self.at = start  # each repetition draws anew: [a-z]{3} is not "aaa"
                parts.append(self._atom())
                size += len(parts[-1])
            self.at = end
        return "".join(parts)

    def _quantifier(self) -> tuple[int, int | None]:
        found = _QUANTIFIER.match(self.pattern, self.at)
        token = found.group() if found else ""
        if not found or (token.startswith("{") and not (found[1] or found[3])):
            return 1, 1  # "{" with no count is a literal
        self.at = found.end()
        if self._peek() in ("?", "+"):  # lazy or possessive: the same strings match
            self.at += 1
        fixed = {"*": (0, None), "+": (1, None), "?": (0, 1)}
        if token in fixed:
            return fixed[token]
        low = int(found[1] or 0)
        if low > _MOST_REPEATS:
            # Its least match is longer than any string drawn: drawing it would stall the
            # server (and ``re`` refuses counts past 2**32 - 1 anyway).
            raise _UnsupportedError(token)
        if not found[2]:
            return low, low
        return low, int(found[3]) if found[3] else None

    def _atom(self) -> str:
        char = self._peek()
        if char == "(":
            return self._group()
        if char == "[":
            return self._one(self._class())
        if char == "\\":
            return self._escape()
        self.at += 1
        if char in ("^", "$"):
            return ""
        if char == ".":
            return self._one(".")
        if char in ("*", "+", "?"):
            raise _UnsupportedError(char)
        return char

    def _one(self, source: str) -> str:
        return self.rng.choice(_chars(source))

    def _group(self) -> str:
        rest = self.pattern[self.at :]
        if rest.startswith("(?:"):
            self.at += 3
        elif rest.startswith("(?P<"):
            self.at = self.pattern.index(">", self.at) + 1
        elif rest.startswith("(?"):
            raise _UnsupportedError(rest[:3])
        else:
            self.at += 1
        text = self._alternatives()
        if self._peek() != ")":
            raise _UnsupportedError("(")
        self.at += 1
        return text

    def _class(self) -> str:
        end = self.at + 1
        end += self.pattern[end] == "^"
        end += self.pattern[end] == "]"  # a "]" first is a member
        while self.pattern[end] != "]":
            end += 2 if self.pattern[end] == "\\" else 1
        source = self.pattern[self.at : end + 1]
        self.at = end + 1
        return source

    def _escape(self) -> str:
        found = _ESCAPE.match(self.pattern, self.at)
        if found is None:
            raise _UnsupportedError("\\")
        source = found.group()
        self.at = found.end()
        letter = source[1]
        if letter in "AZbB":  # anchors and word boundaries take no text
            return ""
        if letter.isdigit() or letter in "gN":  # backreferences, named characters
            raise _UnsupportedError(source)
        if len(source) > 2:
            return source.encode("ascii").decode("unicode_escape")
        return self._one(source) if letter.isalnum() else letter
