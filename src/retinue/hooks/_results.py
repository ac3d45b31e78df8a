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
from retinue._errors import HookError, synchronous_failure
from retinue._lossless import shown_short
from retinue._request import LlmCallConfig
from retinue.prompt import Assembly

from ._calls import listener_label
from ._decisions import Accept, Allow, Ask, Block, Continue, Deny, Stop
from ._seams import Listener

__all__ = ["RESULTS", "Takes", "refusal"]


def _unflawed(_value: object) -> str | None:
    return None


@final
@attrs.frozen
class Takes:
    """What a seam takes of its listeners' results."""

    accepts: Callable[[object], bool]
    """Whether the seam takes a result: of its type, and usable (one call per listener)."""
    what: str
    """What the seam takes, as errors say it."""
    flaw: Callable[[object], str | None] = _unflawed
    """What makes a result of the seam's type unusable all the same, as errors say it, or
    ``None``; read for an error only."""


def _takes(
    types: tuple[type, ...], what: str, flaw: Callable[[object], str | None] | None = None
) -> Takes:
    if flaw is None:
        return Takes(lambda value: isinstance(value, types), what)
    return Takes(lambda value: isinstance(value, types) and flaw(value) is None, what, flaw)


def _prompt_flaw(decision: object) -> str | None:
    if isinstance(decision, Block) and (
        decision.feedback is not None or decision.additional_context is not None
    ):
        # Dropped silently, they would look applied to whoever wrote them.
        return "a Block with feedback or additional_context: a blocked prompt takes only a reason"
    return None


def _config_flaw(config: object) -> str | None:
    if (
        isinstance(config, LlmCallConfig)
        and config.max_tokens is not None
        and config.max_tokens < 1
    ):
        # No API takes it; logged, it would not say what an adapter sends in its place.
        return f"a config with max_tokens {config.max_tokens}"
    return None


def _step_flaw(message: object) -> str | None:
    if isinstance(message, Message) and message.role != "assistant":
        # Only its content is logged, as the assistant's: the role would look applied.
        return f"a {message.role} message: the step's message is the assistant's"
    return None


def _pre_tool_flaw(decision: object) -> str | None:
    if isinstance(decision, Allow) and (
        decision.content is not None or decision.additional_context is not None
    ):
        return (
            "an Allow with content or additional_context: a call cannot be rewritten "
            "before it runs, so they would be lost"
        )
    return None


def _post_tool_flaw(decision: object) -> str | None:
    # Empty feedback counts as none: the reason stands in for it.
    if isinstance(decision, Block) and not decision.feedback and not decision.reason:
        return (
            "a Block with neither feedback nor a reason: the model would see an empty "
            "error in place of the result"
        )
    return None


def _messages(value: object) -> bool:
    # Not text: a str is a sequence of one-character strings, none a Message.
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and all(isinstance(item, Message) for item in value)
    )


RESULTS: Mapping[str, Takes] = MappingProxyType(
    {
        "agent/prompt-submit": _takes((Allow, Block), "Allow or Block", _prompt_flaw),
        "agent/session-prefix": Takes(_messages, "a sequence of Message"),
        "agent/request": _takes((LlmCallConfig,), "LlmCallConfig", _config_flaw),
        "agent/step-result": _takes((Message,), "Message", _step_flaw),
        "agent/turn-continuation": _takes((Continue, Stop), "Continue or Stop"),
        # A listener's None says nothing: strict serial dispatch asks the next one.
        "agent/turn-stop": _takes((Stop,), "None or Stop"),
        "tools/pre-execute": _takes((Allow, Deny, Ask), "Allow, Deny or Ask", _pre_tool_flaw),
        "tools/post-execute": _takes((Accept, Block), "Accept or Block", _post_tool_flaw),
        "system-prompt/assemble": _takes((Assembly,), "Assembly"),
    }
)


def refusal(name: str, fn: Listener, result: object, takes: Takes) -> HookError:
    """The error for *fn*'s *result*, which seam *name* does not accept.

    It names the seam, the listener and what it returned: for a result of the
    seam's type, what makes it unusable; for any other, what the seam takes.
    """
    flaw = takes.flaw(result)
    if flaw is not None:
        return HookError(f"{listener_label(name, fn)} returned {flaw}")
    return HookError(f"{listener_label(name, fn)} returned {_shown(result)}, not {takes.what}")


def _shown(result: object) -> str:
    try:
        return shown_short(result)
    except BaseException as exc:
        # A repr that fails (a SystemExit too: the listener's own failure, as a raise of
        # its would be) must not take the place of the error that reports the value.
        if not synchronous_failure(exc):
            raise
        return f"a {type(result).__name__} that cannot be shown"
