"""Recording an agent's hook calls, for the supervision tests."""

from __future__ import annotations

from typing import Any

import retinue


def record(rt: retinue.Runtime, agent: retinue.Agent, name: str) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    rt.hooks.on(name, lambda _agent, *args: seen.append(args), agent=agent)  # type: ignore[call-overload]
    return seen
