"""What each seam's listeners return, checked as each returns (R6.3, R6.6-R6.9, R7.37).

Checked per listener, the error names the one that returned the wrong thing
(its caller's check, after the chain, could name only the seam), and an
outer listener reads from ``next()`` only what its seam takes. ``tools/execute``
is not here: its result is a type of the tools layer, above this one, which
checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import final

import attrs

from retinue._content import Message
from retinue._errors import HookError
from retinue._lossless import shown_short
from retinue._request import LlmCallConfig
from retinue.prompt import Assembly

from ._calls import listener_label
from ._decisions import Accept, Allow, Ask, Block, Continue, Deny, Stop
from ._seams import Listener

__all__ = ["RESULTS", "Takes", "check_result"]


@final
@attrs.frozen
class Takes:
    """What a seam takes of its listeners' results."""

    accepts: Callable[[object], bool]
    """Whether the seam takes a result."""
    what: str
    """What the seam takes, as errors say it."""


def _messages(value: object) -> bool:
    # Not text: a str is a sequence of one-character strings, none a Message.
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and all(isinstance(item, Message) for item in value)
    )


def _instance_of(*types: type) -> Callable[[object], bool]:
    return lambda value: isinstance(value, types)


RESULTS: Mapping[str, Takes] = MappingProxyType(
    {
        "agent/prompt-submit": Takes(_instance_of(Allow, Block), "Allow or Block"),
        "agent/session-prefix": Takes(_messages, "a sequence of Message"),
        "agent/request": Takes(_instance_of(LlmCallConfig), "LlmCallConfig"),
        "agent/step-result": Takes(_instance_of(Message), "Message"),
        "agent/turn-continuation": Takes(_instance_of(Continue, Stop), "Continue or Stop"),
        # A listener's None says nothing: strict serial dispatch asks the next one.
        "agent/turn-stop": Takes(_instance_of(Stop), "None or Stop"),
        "tools/pre-execute": Takes(_instance_of(Allow, Deny, Ask), "Allow, Deny or Ask"),
        "tools/post-execute": Takes(_instance_of(Accept, Block), "Accept or Block"),
        "system-prompt/assemble": Takes(_instance_of(Assembly), "Assembly"),
    }
)


def check_result(name: str, fn: Listener, result: object, takes: Takes) -> None:
    """Refuse *fn*'s *result* unless seam *name* takes it.

    Raises:
        HookError: naming the seam, the listener, what it returned and what the seam takes.
    """
    if not takes.accepts(result):
        raise HookError(f"{listener_label(name, fn)} returned {_shown(result)}, not {takes.what}")


def _shown(result: object) -> str:
    try:
        return shown_short(result)
    except Exception:
        # A repr that fails must not take the place of the error that reports the value.
        return f"a {type(result).__name__} that cannot be shown"
