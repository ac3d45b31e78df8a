"""Request bodies: what mapping a session's history costs each step, early and late in it.

Each adapter builds the body of every step's request of one session, as the
live loop does: each request's history is the session's snapshot, one step
longer than the last. Two sessions: ``turns``, T turns of a prompt, a step
asking for two tool calls, their results and a step answering; and
``one-turn``, one prompt and T tool steps of a reasoning model (its
reasoning signed as the Responses API returns it, sent back within the
turn). Prints one JSON line per adapter and session: the CPU per body over
the first and the last 50 requests (medians), and, as the floor measured
in the same run, what ``json.dumps`` of the same bodies costs (every body
is encoded whole: that part grows with the session by nature).
``late_over_early`` is the mapping's growth; ``late_vs_encode`` its cost
late in the session against the encoding's. ``scratch_*`` maps each
history from a plain copy, as a request whose history is not a session's
snapshot is mapped. ``kept_over_messages`` is the memory the adapter keeps
beside the history once the session's last request is mapped, over the
memory of the history's messages (traced in a run of its own, untimed).

Run: ``python -m benchmarks.requests [T]`` (default T=500, at least 100; about a minute).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator

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
WINDOW = 50
SMALLEST = 2 * WINDOW


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


def _turns(turns: int) -> Iterator[list[Message]]:
    """The ``turns`` session: what each request adds to the history before it, two requests
    a turn as the loop makes them (one after the prompt, one after the tool results)."""
    answered: list[Message] = []
    for turn in range(1, turns + 1):
        prompt, asking, answer = _turn(turn)
        yield [*answered, *prompt]  # the turn before's answer, then this turn's prompt
        yield asking
        answered = answer


def _one_turn(steps: int) -> Iterator[list[Message]]:
    """The ``one-turn`` session: a prompt, then a reasoning model's tool steps."""
    yield [Message("user", (Text("Look up everything."),))]
    for step in range(steps):
        call = ToolCall(f"call_{step}", "lookup", f'{{"key": "k{step}"}}')
        item = {"type": "reasoning", "id": f"rs_{step}", "summary": []}
        signature = "\n".join(
            json.dumps(line) for line in (item, {"call_id": call.id, "id": f"fc_{step}"})
        )
        result = ToolResultBlock(call.id, (Text(f"value of k{step}"),), False)
        yield [
            Message("assistant", (Reasoning("Next key.", signature), call)),
            Message("user", (result,)),
        ]


SESSIONS: dict[str, Callable[[int], Iterator[list[Message]]]] = {
    "turns": _turns,
    "one-turn": _one_turn,
}


def _step_costs(
    build: Callable[[ModelRequest], Body], additions: Iterator[list[Message]], *, live: bool
) -> tuple[list[float], list[float]]:
    """Per request: the body's CPU seconds, and those of json.dumps of it."""
    history: list[Message] = []
    derived: dict[object, object] = {}
    built_s: list[float] = []
    encoded_s: list[float] = []
    for added in additions:
        history += added
        if live:
            messages = MessageHistory(history, len(history), derived=derived)
        else:
            messages = MessageHistory(history[:])
        request = ModelRequest(CONFIG, messages, "Be brief.")
        started = time.process_time()
        body = build(request)
        built = time.process_time()
        json.dumps(body)
        built_s.append(built - started)
        encoded_s.append(time.process_time() - built)
    return built_s, encoded_s


def _window_us(costs: list[float], *, late: bool) -> float:
    window = costs[-WINDOW:] if late else costs[:WINDOW]
    return round(statistics.median(window) * 1e6, 1)


def _kept_over_messages(
    build: Callable[[ModelRequest], Body], additions: Callable[[], Iterator[list[Message]]]
) -> float:
    """Memory the adapter keeps beside a session's history once every step is mapped, over its messages'.

    Traced apart from the timed runs: tracemalloc slows every allocation.
    """
    gc.collect()
    tracemalloc.start()
    try:
        history = [message for added in additions() for message in added]
        messages = tracemalloc.get_traced_memory()[0]
        derived: dict[object, object] = {}
        length = 0
        for added in additions():
            length += len(added)
            build(
                ModelRequest(CONFIG, MessageHistory(history, length, derived=derived), "Be brief.")
            )
        gc.collect()  # only what the history keeps is left: the bodies are gone
        return (tracemalloc.get_traced_memory()[0] - messages) / messages
    finally:
        tracemalloc.stop()


def measure(api: str, session: str, size: int) -> dict[str, object]:
    """One adapter's figures over a *session* of *size* turns or steps."""
    build, additions = BUILDERS[api], SESSIONS[session]
    live, encoded = _step_costs(build, additions(size), live=True)
    scratch, _ = _step_costs(build, additions(size), live=False)
    figures = {
        "early_us": _window_us(live, late=False),
        "late_us": _window_us(live, late=True),
        "encode_early_us": _window_us(encoded, late=False),
        "encode_late_us": _window_us(encoded, late=True),
        "scratch_early_us": _window_us(scratch, late=False),
        "scratch_late_us": _window_us(scratch, late=True),
    }
    return {
        "benchmark": "requests",
        "api": api,
        "session": session,
        "requests": len(live),
        **figures,
        "late_over_early": round(figures["late_us"] / figures["early_us"], 2),
        "late_vs_encode": round(figures["late_us"] / figures["encode_late_us"], 2),
        "scratch_late_vs_encode": round(figures["scratch_late_us"] / figures["encode_late_us"], 2),
        "kept_over_messages": round(_kept_over_messages(build, lambda: additions(size)), 2),
    }


def main(argv: list[str]) -> None:
    """Parse the session size; print one line per session and adapter."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.requests", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "size", nargs="?", type=int, default=500, metavar="T", help="turns or steps a session"
    )
    size = parser.parse_args(argv).size
    if size < SMALLEST:
        # The one-turn session makes T + 1 requests: fewer than two windows' worth
        # and its late window holds early requests, so late_over_early says nothing.
        parser.error(
            f"T must be at least {SMALLEST}, so that the first and the last {WINDOW} requests differ"
        )
    for session in SESSIONS:
        for api in BUILDERS:
            emit(measure(api, session, size))


if __name__ == "__main__":
    main(sys.argv[1:])
