"""The seams: each one's name and dispatch mode, and the checks of what registers on them."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Literal, TypeAlias

from retinue._callables import check_callable
from retinue._naming import qualified_name

__all__ = [
    "SEAMS",
    "Listener",
    "SeamName",
    "check_listener",
    "qualified_name",
    "seam_mode",
]

Listener = Callable[..., object]
"""A listener: any callable, sync or async; its arguments and result depend on its seam."""
SeamName: TypeAlias = Literal[
    "agent/created",
    "agent/disposed",
    "agent/status",
    "agent/queued",
    "agent/error",
    "agent/session-start",
    "agent/retry",
    "agent/restarted",
    "agent/prompt-submit",
    "agent/session-prefix",
    "agent/pre-step",
    "agent/request",
    "agent/step-result",
    "agent/turn-continuation",
    "agent/turn-stop",
    "tools/pre-execute",
    "tools/execute",
    "tools/post-execute",
    "tools/result",
    "session/created",
    "session/event",
    "session/flush",
    "system-prompt/assemble",
    "agent-loop/config-start-failed",
]
"""A seam name as a type: the keys of ``SEAMS``, for a name that is not written out."""
# Read-only: the bus checks names and modes against it, so an entry added or
# changed from outside would let a listener past those checks.
SEAMS: Mapping[str, str] = MappingProxyType(
    {
        "agent/created": "emit",
        "agent/disposed": "emit",
        "agent/status": "emit",
        "agent/queued": "emit",
        "agent/error": "emit",
        "agent/session-start": "emit",
        "agent/retry": "emit",
        "agent/restarted": "emit",
        "agent/prompt-submit": "waterfall",
        "agent/session-prefix": "waterfall",
        "agent/pre-step": "serial",
        "agent/request": "waterfall",
        "agent/step-result": "waterfall",
        "agent/turn-continuation": "waterfall",
        "agent/turn-stop": "strict-serial",
        "tools/pre-execute": "waterfall",
        "tools/execute": "waterfall",
        "tools/post-execute": "waterfall",
        "tools/result": "emit",
        "session/created": "emit",
        "session/event": "emit",
        "session/flush": "parallel",
        "system-prompt/assemble": "waterfall",
        "agent-loop/config-start-failed": "emit",
    }
)


def seam_mode(name: str) -> str:
    """The dispatch mode of seam *name*; a misspelled name is refused, naming the closest seam."""
    if not isinstance(name, str):
        raise TypeError(f"a seam's name is a str (retinue.hooks.SEAMS lists them), got {name!r}")
    mode = SEAMS.get(name)
    if mode is None:
        close = difflib.get_close_matches(name, SEAMS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"{name!r} is not a seam{hint} (retinue.hooks.SEAMS lists them)")
    return mode


def check_listener(name: str, fn: Listener) -> None:
    mode = seam_mode(name)
    check_callable(fn, f"{name} listeners", synchronous=mode == "emit")
