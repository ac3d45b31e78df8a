"""The step function of ``ScriptedModel.tool_loop``: calls after a prompt, an answer after results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

import attrs

from retinue._content import Message, ToolResultBlock
from retinue._lossless import shown_short
from retinue._request import ModelRequest
from retinue.session._history import is_envelope
from retinue.testing._steps import CallTools, Reply, Step

__all__ = ["ToolLoop", "tool_names_of"]


def tool_names_of(tool_names: object) -> tuple[str, ...]:
    """*tool_names* as the names :meth:`ScriptedModel.tool_loop` cycles through, in order.

    Raises:
        TypeError: *tool_names* is a ``str`` or no sequence, or holds a name
            that is no ``str``; the message names the fix.
    """
    # A str is a sequence of names too: "lookup" would call tools "l" and "o".
    if isinstance(tool_names, str):
        raise TypeError(f"tool_names must be a list of names, got a str: [{tool_names!r}]")
    # A set's order changes from run to run, and the calls with it.
    if not isinstance(tool_names, Sequence):
        raise TypeError(f"tool_names must be a list of names, got {shown_short(tool_names)}")
    for index, name in enumerate(tool_names):
        if not isinstance(name, str):
            # A tool object is the likely mistake: its name is what a call names.
            own = getattr(name, "name", None)
            hint = f": pass its name, {own!r}" if isinstance(own, str) else ""
            raise TypeError(
                f"tool_names[{index}] must be a tool's name (a str), "
                f"got a {type(name).__name__}{hint}"
            )
    return tuple(tool_names)


@final
@attrs.frozen
class ToolLoop:
    """The step function of :meth:`ScriptedModel.tool_loop`."""

    call: CallTools
    reply: Reply

    def __call__(self, request: ModelRequest) -> Step:
        if _results_since_last_reply(request.messages):
            return self.reply
        return self.call


def _results_since_last_reply(messages: Sequence[Message]) -> bool:
    """Whether tool results are the last input after the last assistant message.

    Hooks may add context or steering after the results (R9.18), so the last
    message alone cannot tell; a prompt after them (the next turn's, once a
    cancel cut a turn in its tools) is new input, answered with calls. The walk
    stops at the assistant message: this runs once per model call, and earlier
    rounds do not matter.
    """
    # Plain loops, not any() over a generator: this runs once per model call, and the
    # benchmarks count it. A MessageHistory walks itself backwards without indexing the view.
    for message in reversed(messages):
        if message.role == "assistant":
            return False
        content = message.content
        for block in content:
            if isinstance(block, ToolResultBlock):
                return True
        if not is_envelope(content):
            return False  # a prompt: new input since the results
    return False
