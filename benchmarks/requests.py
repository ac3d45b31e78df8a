"""Request bodies: what mapping a session's history costs each step, early and late in it.

Each adapter builds the body of every step's request of one session of T
turns (a prompt, a step asking for two tool calls, their results, a step
answering), as the live loop does: each request's history is the session's
snapshot, one step longer than the last. Prints one JSON line per adapter:
the CPU per body over the first and the last 25 turns (medians of their
steps), and, as the floor measured in the same run, what ``json.dumps`` of
the same bodies costs (the SDK encodes every body whole: that part grows
with the session by nature). ``late_over_early`` is the mapping's growth;
``late_vs_encode`` its cost late in the session against the encoding's.
``scratch_*`` maps each history from a plain copy, as a request whose
history is not a session's snapshot is mapped.

Run: ``python -m benchmarks.requests [T]`` (default T=500; about a minute).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body

from ._common import emit

Body = dict[str, object]
BUILDERS: dict[str, Callable[[ModelRequest], Body]] = {
    "chat": chat_request_body,
    "responses": responses_request_body,
    "anthropic": anthropic_request_body,
}
CONFIG = LlmCallConfig("bench-model")
WINDOW = 25


def _turn(turn: int) -> list[list[Message]]:
    """One turn's messages, grouped as they stand before each step's request."""
    calls = tuple(ToolCall(f"call_{turn}_{n}", "lookup", f'{{"key": "k{n}"}}') for n in (1, 2))
    asking = Message("assistant", (Reasoning("I should look it up.", "c2lnbmF0dXJl"), *calls))
    results = [
        Message("user", (ToolResultBlock(call.id, (Text(f"value of {call.id}"),), False),))
        for call in calls
    ]
    prompt = Message("user", (Text(f"Question number {turn}: what are k1 and k2?"),))
    answer = Message("assistant", (Text(f"k1 and k2 of turn {turn} are known now."),))
    return [[prompt], [asking, *results], [answer]]


def _step_costs(build: Callable[[ModelRequest], Body], turns: int, *, live: bool) -> list[float]:
    """Per step: the body's CPU seconds, and those of json.dumps of it, alternately."""
    history: list[Message] = []
    derived: dict[object, object] = {}
    costs: list[float] = []
    for turn in range(1, turns + 1):
        before_steps, *more = _turn(turn)
        history += before_steps
        for step in range(2):
            if live:
                messages = MessageHistory(history, len(history), derived=derived)
            else:
                messages = MessageHistory(history[:])
            request = ModelRequest(CONFIG, messages, "Be brief.")
            started = time.process_time()
            body = build(request)
            built = time.process_time()
            json.dumps(body)
            costs += [built - started, time.process_time() - built]
            history += more[step]
    return costs


def _window_us(costs: list[float], first: int, last: int) -> float:
    return round(statistics.median(costs[first:last]) * 1e6, 1)


def measure(api: str, turns: int) -> dict[str, object]:
    """One adapter's figures over a session of *turns* turns."""
    live = _step_costs(BUILDERS[api], turns, live=True)
    scratch = _step_costs(BUILDERS[api], turns, live=False)
    steps = 2 * WINDOW  # a window's requests
    early, late = (0, 2 * steps), (len(live) - 2 * steps, len(live))
    figures = {
        "early_us": _window_us(live[0::2], early[0] // 2, early[1] // 2),
        "late_us": _window_us(live[0::2], late[0] // 2, late[1] // 2),
        "encode_early_us": _window_us(live[1::2], early[0] // 2, early[1] // 2),
        "encode_late_us": _window_us(live[1::2], late[0] // 2, late[1] // 2),
        "scratch_early_us": _window_us(scratch[0::2], early[0] // 2, early[1] // 2),
        "scratch_late_us": _window_us(scratch[0::2], late[0] // 2, late[1] // 2),
    }
    return {
        "benchmark": "requests",
        "api": api,
        "turns": turns,
        "messages": 5 * turns,
        **figures,
        "late_over_early": round(figures["late_us"] / figures["early_us"], 2),
        "late_vs_encode": round(figures["late_us"] / figures["encode_late_us"], 2),
        "scratch_late_vs_encode": round(figures["scratch_late_us"] / figures["encode_late_us"], 2),
    }


def main(argv: list[str]) -> None:
    turns = int(argv[0]) if argv else 500
    for api in BUILDERS:
        emit(measure(api, turns))


if __name__ == "__main__":
    main(sys.argv[1:])
