"""Lossless-JSON validation and deep immutable snapshots (R1.6, R4.5, R4.7)."""

from __future__ import annotations

from ._depth import Levels, deeper_than
from ._freeze import (
    JSON_LEVELS,
    MAX_JSON_DEPTH,
    FrozenDict,
    JsonValue,
    check_json,
    freeze_json,
    thaw_json,
    too_deep,
)
from ._ints import (
    NEG_SMALL_INT,
    SMALL_INT,
    check_digits,
    is_count,
    is_finite_number,
    shown,
    shown_short,
    writable_int,
)
from ._loads import loads_finite, loads_frozen
from ._same import same_json
from ._surrogates import joined_surrogates

__all__ = [
    "JSON_LEVELS",
    "MAX_JSON_DEPTH",
    "NEG_SMALL_INT",
    "SMALL_INT",
    "FrozenDict",
    "JsonValue",
    "Levels",
    "check_digits",
    "check_json",
    "deeper_than",
    "freeze_json",
    "is_count",
    "is_finite_number",
    "joined_surrogates",
    "loads_finite",
    "loads_frozen",
    "same_json",
    "shown",
    "shown_short",
    "thaw_json",
    "too_deep",
    "writable_int",
]
