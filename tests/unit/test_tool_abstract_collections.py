"""Parameters hinted by the abstract collections a list or a dict is one of (R9.7)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, MutableMapping, MutableSequence

from retinue._lossless import JsonValue
from retinue.tools import tool
from tests.unit._tool_kit import execute, properties


def _tally(
    counts: Iterable[int],
    names: Collection[str],
    queue: MutableSequence[int],
    scores: MutableMapping[str, int],
) -> str:
    return f"{sum(counts)} {sorted(names)} {queue} {dict(scores)}"


async def test_abstract_collections_are_arrays_and_objects_given_as_lists_and_dicts() -> None:
    """R9.7: ``Iterable[X]``, ``Collection[X]`` and ``MutableSequence[X]`` are arrays the
    body gets as a list, ``MutableMapping[str, X]`` an object it gets as a dict; none is
    refused as an unsupported type."""
    tally = tool(_tally)
    assert properties(tally) == {
        "counts": {"type": "array", "items": {"type": "integer"}},
        "names": {"type": "array", "items": {"type": "string"}},
        "queue": {"type": "array", "items": {"type": "integer"}},
        "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
    }
    arguments: JsonValue = {
        "counts": [1, 2.0],
        "names": ["b", "a"],
        "queue": [3],
        "scores": {"k": 1},
    }
    assert await execute(tally, arguments) == ("3 ['a', 'b'] [3] {'k': 1}", None)
