"""Building tools from hand-written schemas and checking arguments against them, for the schema
keyword tests.
"""

from __future__ import annotations

from collections.abc import Mapping

from retinue._lossless import freeze_json
from retinue.tools import Tool


def nothing(**_arguments: object) -> None:
    return None


def built(parameters: object) -> Tool:
    return Tool("t", "A tool.", parameters, nothing)  # type: ignore[arg-type]


def check(parameters: Mapping[str, object], arguments: object) -> str | None:
    return built(parameters).check_arguments(freeze_json(arguments))


def holding(name: str, schema: object) -> dict[str, object]:
    return {"type": "object", "properties": {name: schema}}
