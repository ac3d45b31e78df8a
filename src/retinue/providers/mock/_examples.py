"""Example tool arguments drawn from a JSON schema, the way a model fills them in.

Each value is drawn as candidates that a checker of the schema's scalar
keywords accepts or refuses: a draw proposes, the schema disposes. The
providers layer sits below the tools, so the checker is built from
:mod:`retinue._jsonschema`, which the tools' validator judges with too.
"""

from __future__ import annotations

import itertools
import math
import random
import uuid
from collections.abc import Callable, Iterator, Mapping

import attrs

from retinue._jsonschema import (
    MAX_REF_HOPS,
    is_number,
    json_key,
    resolve_ref,
    schema_list,
    type_names,
)
from retinue._patterns import ending_at_text_end

from ._scalars import grid_window, holds, sample_strings, step_grid

__all__ = ["WORDS", "example_arguments"]

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")

Schema = Mapping[str, object]

_DEEP = 3
"""Nesting from which a value is the smallest the schema allows, so recursive schemas end."""
_DEEPEST = 32
"""Nesting at which a schema that demands deeper values gets ``null``: none would be finite."""
_TRIES = 24
"""Candidates tried for one value before the first is kept, fitting or not."""
_FORMAT_DRAWS = 16
"""Values of a string format drawn for one string: items of a unique array each need one,
and the smallest value spaces (762 ipv4 addresses) hold 200 items only with this many."""
_LARGEST = 10_000
"""The most characters, items or properties a drawn value has, whatever a schema asks:
a ``minLength`` of ``1e308`` is a schema no model could answer, not one to draw for."""
_BUDGET = 5000
"""Candidates drawn for one call's arguments in all; past it, values are ``null``.

Retries cannot multiply down a nesting, and a schema whose smallest value is
vast (every node requiring three more, say) still gets its arguments promptly.
"""
_REDRAWS = 4
"""Draws of a schema with unions, each taking the next-best branch, before giving up."""

# Keywords that apply another schema to the same value.
_IN_PLACE = frozenset({"$ref", "allOf", "anyOf", "oneOf", "not"})
_HINTS = (
    ("object", frozenset({"properties", "required", "additionalProperties", "propertyNames"})),
    ("object", frozenset({"minProperties", "maxProperties"})),
    ("array", frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems"})),
    ("string", frozenset({"minLength", "maxLength", "pattern"})),
    ("number", frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})),
    ("number", frozenset({"multipleOf"})),
)
_CONTAINER = frozenset().union(*(keys for kind, keys in _HINTS if kind in ("object", "array")))
_SCALAR = frozenset(
    {"type", "enum", "const"}.union(
        *(keys for kind, keys in _HINTS if kind in ("string", "number"))
    )
)


def example_arguments(schema: Schema, rng: random.Random) -> dict[str, object]:
    """Plausible arguments for a JSON object schema, which a validator of it accepts.

    Fills every required property (near the top, every property when none
    is required) and honours ``type``, ``enum``, ``const``, local ``$ref`` (recursive ones
    end with the smallest value allowed), ``allOf``, ``anyOf`` and ``oneOf``
    (a branch that suits the rest of the schema), numeric bounds and
    ``multipleOf``, string lengths, ``pattern`` (literals, classes, groups,
    ``|`` and quantifiers; not lookarounds, backreferences or inline flags),
    array sizes with ``uniqueItems`` and ``prefixItems``, object sizes,
    ``additionalProperties`` and ``propertyNames``. A ``not`` and the other
    branches of a ``oneOf`` are avoided when they hold only scalar keywords.
    Where a schema asks for more (or nothing satisfies it), the value is a
    best effort a validator may refuse. Entries it cannot read (a ``required``
    name that is not a string, a property that is not a schema) are skipped
    rather than failing.
    """
    arguments = _Draw(schema, rng).value(schema, "", 0)
    return arguments if isinstance(arguments, dict) else {}


@attrs.frozen
class _Pick:
    """How one draw of a schema picks the members of its unions."""

    order: random.Random
    """Shuffles the members; seeded alike on every redraw, so that a redraw ranks them alike."""
    redraw: int
    """Which ranked member: the best fit first, the next on a redraw."""


@attrs.define
class _Draw:
    """The values drawn for one schema: ``$ref``s resolve in ``root``."""

    root: Schema
    rng: random.Random
    budget: int = _BUDGET

    def value(
        self, schema: object, name: str, depth: int, avoid: frozenset[object] = frozenset()
    ) -> object:
        """A value for *schema* named *name*, JSON-unequal to those in *avoid* (keys)."""
        if depth > _DEEPEST or self.budget < 0:
            return None
        first: list[object] = []
        seed = self.rng.getrandbits(64)
        for redraw in range(_REDRAWS):
            nodes = self._nodes(schema, depth, _Pick(random.Random(seed), redraw))
            tries = self._candidates(nodes, name, depth)
            for candidate in itertools.islice(tries, _TRIES + len(avoid)):
                first = first or [candidate]
                self.budget -= 1
                if self.budget < 0 or self._fits(candidate, nodes, avoid):
                    return candidate
            if not any("anyOf" in node or "oneOf" in node for node in nodes):
                break  # the same schemas again would give the same misfits
        return first[0] if first else None

    def _fits(self, value: object, nodes: list[Schema], avoid: frozenset[object]) -> bool:
        if (avoid and json_key(value) in avoid) or not all(holds(value, node) for node in nodes):
            return False
        return not any(
            self._surely(value, node["not"], MAX_REF_HOPS) for node in nodes if "not" in node
        )

    def _surely(self, value: object, schema: object, hops: int) -> bool:
        """Whether *value* surely matches *schema*; ``False`` when that takes more than holds()."""
        if not isinstance(schema, Mapping):
            return schema is True
        keys = schema.keys()
        if keys & (_IN_PLACE - {"$ref"}) or (
            isinstance(value, list | tuple | Mapping) and keys & _CONTAINER
        ):
            return False
        if not holds(value, schema):
            return False
        if "$ref" not in schema:
            return True
        return hops > 0 and self._surely(value, resolve_ref(self.root, schema["$ref"]), hops - 1)

    # -- the schemas one value must match -----------------------------------------

    def _nodes(
        self, schema: object, depth: int, pick: _Pick, path: tuple[int, ...] = ()
    ) -> list[Schema]:
        """*schema*, its ``$ref``'s target, its ``allOf`` members and a branch of each union."""
        if not isinstance(schema, Mapping) or id(schema) in path:
            return []  # a reference back to a schema on the path adds nothing new
        path = (*path, id(schema))
        nodes: list[Schema] = [schema]
        if "$ref" in schema:
            nodes += self._nodes(resolve_ref(self.root, schema["$ref"]), depth, pick, path)
        for member in schema_list(schema.get("allOf")):
            nodes += self._nodes(member, depth, pick, path)
        for union in ("anyOf", "oneOf"):
            members: list[object] = [
                m for m in schema_list(schema.get(union)) if isinstance(m, Mapping) or m is True
            ]
            if members:
                chosen = self._branch(members, nodes, depth, pick, path)
                nodes += chosen[1]
                if union == "oneOf":  # its value must match no other member
                    nodes += [{"not": m} for m in members if m is not chosen[0]]
        return nodes

    def _branch(
        self,
        members: list[object],
        nodes: list[Schema],
        depth: int,
        pick: _Pick,
        path: tuple[int, ...],
    ) -> tuple[object, list[Schema]]:
        """A member and its nodes, ranked by how its type suits *nodes* and the depth."""
        shuffled = pick.order.sample(members, len(members))
        drawn = [(m, self._nodes(m, depth, pick, path)) for m in shuffled]
        ranked = sorted(drawn, key=lambda pair: self._misfit(pair[1], nodes, depth))
        return ranked[pick.redraw % len(ranked)]

    def _misfit(self, branch: list[Schema], nodes: list[Schema], depth: int) -> tuple[bool, bool]:
        mine, theirs = _allowed(branch), _allowed(nodes)
        clash = mine is not None and theirs is not None and not mine & theirs
        kind = self._kind(branch)
        # A model fills an optional value in; deep in a recursive schema, it stops.
        small = kind not in ("array", "object") if depth >= _DEEP else kind != "null"
        return clash, not small

    def _kind(self, nodes: list[Schema]) -> str:
        """The JSON type to draw: the first one every node allows, ``null`` last."""
        allowed = _allowed(nodes)
        if allowed is None:
            order = _inferred(nodes)
        else:
            named = dict.fromkeys(
                [*(n for node in nodes for n in type_names(node) or ()), "integer"]
            )
            order = [n for n in named if n in allowed] or [*named][:1]
        excluded = {n for node in nodes for n in _types_refused(node.get("not"))}
        kept = [n for n in order if n not in excluded] or order
        return next((n for n in kept if n != "null"), "null")

    # -- candidates ---------------------------------------------------------------

    def _candidates(self, nodes: list[Schema], name: str, depth: int) -> Iterator[object]:
        for node in nodes:
            if "const" in node:
                return iter((node["const"],))
        for node in nodes:
            if "enum" in node:
                options = schema_list(node["enum"])
                return iter(self.rng.sample(options, len(options)))
        kind = self._kind(nodes)
        if kind in ("integer", "number"):
            return self._numbers(nodes, integer=kind == "integer")
        if kind == "boolean":
            heads = self.rng.random() < 0.5
            return iter((heads, not heads))
        if kind == "null":
            return iter((None,))
        if kind == "array":
            return (self._array(nodes, name, depth) for _ in itertools.count())
        if kind == "object":
            # Each try one property more: a repeat of an object to avoid (uniqueItems)
            # is not drawn again as it was.
            return (self._object(nodes, depth, more) for more in itertools.count())
        return self._strings(nodes, name)

    def _numbers(self, nodes: list[Schema], *, integer: bool) -> Iterator[int | float]:
        """The multiples of a grid within the bounds, from a random one on."""
        grid = step_grid(nodes, integer=integer)
        low, high = grid_window(nodes, grid)
        # Without a step of its own, a tight window of numbers gets a finer grid.
        fixed = integer or any("multipleOf" in node for node in nodes)
        while not fixed and low is not None and high is not None and low > high and grid > 1e-6:
            grid /= 10
            low, high = grid_window(nodes, grid)
        span = math.floor(10 / grid)  # about ten units wide, as a model would pick
        if low is None:
            low = high - span if high is not None else math.ceil((1 if integer else 0) / grid)
        if high is None:
            high = low + span
        count = max(1, high - low + 1)
        start = self.rng.randrange(count)
        for index in range(count):
            value = (low + (start + index) % count) * grid
            yield int(value) if integer else float(value)

    def _strings(self, nodes: list[Schema], name: str) -> Iterator[str]:
        low = max(_limits(nodes, "minLength"), default=0)
        high = min(_limits(nodes, "maxLength"), default=None)
        for node in nodes:
            form = node.get("format")
            if isinstance(form, str) and form in _FORMATS:
                # A few, not one: items of a unique array each need a value of their own.
                yield from (_FORMATS[form](self.rng) for _ in range(_FORMAT_DRAWS))
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                # A match padded or cut is a near miss, which can make a nested quantifier
                # backtrack for ages: only a match with an open end (or, failing that, an
                # open start: a pattern is searched, not matched) is padded, still a match.
                end, start = _ends_open(pattern), _starts_open(pattern)
                for sample in sample_strings(pattern, self.rng, low):
                    yield (
                        _fit(sample, low, None)
                        if end
                        else _fit_front(sample, low)
                        if start
                        else sample
                    )
        words = self.rng.sample(WORDS, len(WORDS))
        yield from (_fit(f"{name} {word}" if name else word, low, high) for word in words)
        for number in itertools.count(2):
            yield from (_fit(f"{word}{number}", low, high) for word in words)

    def _array(self, nodes: list[Schema], name: str, depth: int) -> list[object]:
        low = max(_limits(nodes, "minItems"), default=0)
        high = min(_limits(nodes, "maxItems"), default=None)
        prefix = next((p for node in nodes if (p := schema_list(node.get("prefixItems")))), [])
        items = [node["items"] for node in nodes if "items" in node]
        if any(item is False for item in items):
            high = len(prefix) if high is None else min(high, len(prefix))
        unique = any(node.get("uniqueItems") is True for node in nodes)
        count = max(low, 0 if depth >= _DEEP else 1)
        values: list[object] = []
        for index in range(count if high is None else min(count, high)):
            schema = prefix[index] if index < len(prefix) else _all_of(items)
            avoid = frozenset(map(json_key, values)) if unique else frozenset()
            values.append(self.value(schema, name, depth + 1, avoid))
        return values

    def _object(self, nodes: list[Schema], depth: int, more: int = 0) -> dict[str, object]:
        """An object with the required properties, and *more* beyond its least size."""
        properties: dict[str, list[object]] = {}
        for node in nodes:
            found = node.get("properties")
            for key, schema in found.items() if isinstance(found, Mapping) else ():
                properties.setdefault(str(key), []).append(schema)
        required = [n for node in nodes for n in schema_list(node.get("required"))]
        names = list(dict.fromkeys(n for n in required if isinstance(n, str)))
        high = min(_limits(nodes, "maxProperties"), default=None)
        least = max(_limits(nodes, "minProperties"), default=0)
        low = least + more if high is None else max(least, min(least + more, high))
        optional = [n for n in properties if n not in names]
        wanted = len(optional) if not names and depth < _DEEP else low - len(names)
        if high is not None:
            wanted = min(wanted, high - len(names))
        extra = [node["additionalProperties"] for node in nodes if "additionalProperties" in node]
        values: dict[str, object] = {}
        for key in [*names, *optional[: max(0, wanted)]]:
            schemas = properties.get(key) or extra
            if all(isinstance(s, Mapping) or s is True for s in schemas):
                values[key] = self.value(_all_of(schemas), key, depth + 1)
        key_schema = _all_of([node["propertyNames"] for node in nodes if "propertyNames" in node])
        while len(values) < low and not any(e is False for e in extra):
            key = self.value(key_schema, "extra", depth + 1, frozenset(values))
            if not isinstance(key, str) or key in values:
                break  # no new name fits: the object stays short
            values[key] = self.value(_all_of(extra), key, depth + 1)
        return values


# -- reading a schema -------------------------------------------------------------


def _moment(rng: random.Random) -> tuple[str, str]:
    day = f"20{rng.randrange(20, 30)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    return day, f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"


_TEST_NETS = ("192.0.2", "198.51.100", "203.0.113")

# A model fills a field of a known format with a value of it: a tool that parses its dates,
# ids or addresses (pydantic writes the format of each) would refuse words on every call.
_FORMATS: dict[str, Callable[[random.Random], str]] = {
    "date-time": lambda rng: "T".join(_moment(rng)),
    "date": lambda rng: _moment(rng)[0],
    "time": lambda rng: _moment(rng)[1],
    "uuid": lambda rng: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "email": lambda rng: f"{rng.choice(WORDS)}{rng.randrange(1000)}@example.com",
    "uri": lambda rng: f"https://example.com/{rng.choice(WORDS)}/{rng.randrange(1000)}",
    "hostname": lambda rng: f"{rng.choice(WORDS)}{rng.randrange(1000)}.example.com",
    "duration": lambda rng: f"PT{rng.randrange(1, 24)}H{rng.randrange(60)}M",
    # The three ranges kept for documentation (RFC 5737): no real host is reached.
    "ipv4": lambda rng: f"{rng.choice(_TEST_NETS)}.{rng.randrange(1, 255)}",
    "ipv6": lambda rng: f"2001:db8::{rng.randrange(1, 0xFFFF):x}",
}


def _all_of(schemas: list[object]) -> object:
    """One schema for a value that must match every schema in *schemas*."""
    kept = [s for s in schemas if isinstance(s, Mapping)]
    if len(kept) == 1:
        return kept[0]
    return {"allOf": kept} if kept else True


def _allowed(nodes: list[Schema]) -> set[str] | None:
    """The types every node allows (``integer`` within ``number``); ``None`` when none names one."""
    allowed: set[str] | None = None
    for node in nodes:
        names = type_names(node)
        if names is not None:
            found = set(names) | ({"integer"} if "number" in names else set())
            allowed = found if allowed is None else allowed & found
    return allowed


def _inferred(nodes: list[Schema]) -> list[str]:
    """Types in the order the keywords suggest them, for a schema that names none."""
    keys = {key for node in nodes for key in node}
    return [*(kind for kind, hints in _HINTS if keys & hints), "string", "integer", "boolean"]


def _types_refused(schema: object) -> list[str]:
    """The types a ``not`` refuses outright: one that holds nothing but ``type``."""
    if not isinstance(schema, Mapping):
        return []
    if schema.keys() & (_SCALAR | _IN_PLACE | _CONTAINER) != {"type"}:
        return []
    names = type_names(schema) or []
    return [*names, "integer"] if "number" in names else names


def _limits(nodes: list[Schema], keyword: str) -> list[int]:
    return [
        min(int(v), _LARGEST)
        for node in nodes
        if is_number(v := node.get(keyword)) and math.isfinite(v)
    ]


def _ends_open(pattern: str) -> bool:
    """Whether a match of *pattern* is still one with text added at its end: no end anchor.

    Read as the validator reads it: a ``$`` anchor becomes ``\\Z``, while an
    escaped ``\\$`` or a ``$`` in a class is a character like any other.
    """
    return "\\Z" not in ending_at_text_end(pattern)


def _starts_open(pattern: str) -> bool:
    """Whether a match of *pattern* is still one with text added before it: no ``^`` or
    ``\\A`` anywhere (read coarsely: a ``[^...]`` class counts too, which only pads less)."""
    return "^" not in pattern and "\\A" not in pattern


def _fit_front(text: str, low: int) -> str:
    """*text* with words put before it up to *low* characters."""
    if len(text) >= low:
        return text
    filler = " ".join(WORDS)
    return (filler * (low // len(filler) + 1))[: low - len(text) - 1] + " " + text


def _fit(text: str, low: int, high: int | None) -> str:
    """*text* padded with words to at least *low* characters, cut to at most *high*."""
    if len(text) < low:
        filler = " ".join(WORDS)
        text = f"{text} {filler * (low // len(filler) + 1)}"[:low]
    return text if high is None else text[:high]
