"""Tool-call pairing in a request's history, refused as each API refuses a broken pair.

Only what the real APIs are known to refuse: a call answered by no result (in
Chat Completions and Anthropic Messages, none before the history goes on), and a
result answering no call. Chat messages that end on their calls pass, as the API
is not known to refuse them. One pass over the history, ids in sets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ._render import error_body
from ._render_shared import dumps
from ._values import Api

__all__ = ["pairing_refusal"]

_TOOL_FIRST = (
    # sic: the API's own spelling
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
_UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)
_NO_RESULT = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in the "
    "next message."
)
_NO_USE = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: "
    "{id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)


def pairing_refusal(api: Api, body: Mapping[str, object]) -> bytes | None:
    """The 400 error body *api* answers a history breaking tool-call pairing with; ``None``
    when every call the history goes on from is answered and every result answers one.

    *body*'s fields have the types the mock reads (refused before otherwise).
    """
    return _CHECKS[api](body)


def _openai(message: str, param: str | None) -> bytes:
    # error_body fills a missing code in; these refusals give none.
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return dumps({"error": error}).encode()


def _strings(values: object, key: str) -> list[str]:
    """The string *key* of each object in *values*, if a list."""
    if not isinstance(values, list):
        return []
    return [v[key] for v in values if isinstance(v, dict) and isinstance(v.get(key), str)]


_NO_IDS: tuple[str, ...] = ()


class _Turns:
    """Anthropic's turns, read a message at a time: the turn being read (where it starts,
    its role, its tool_use ids, its tool_result blocks as message index, block index and
    the id each answers) and the tool_use ids of the assistant turn before it.

    One per history, its lists reused from turn to turn: the server checks every request,
    whose history grows with the session, so the check allocates nothing per message.
    """

    __slots__ = ("asked", "asker", "first", "results", "role", "uses")

    def __init__(self) -> None:
        self.first = -1
        self.role: object = None
        self.uses: list[str] = []
        self.results: list[tuple[int, int, str]] = []
        self.asked: Sequence[str]
        self.asker, self.asked = -1, _NO_IDS

    def read(self, index: int, message: Mapping[str, object]) -> bytes | None:
        """Read *message*, closing the turn before it if its role starts a new one."""
        role, content = message.get("role"), message.get("content")
        if self.first < 0 or role != self.role:
            if (refused := self.close()) is not None:
                return refused
            self.first, self.role = index, role
        if isinstance(content, list):
            for number, block in enumerate(content):
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_use" and isinstance(block.get("id"), str):
                    self.uses.append(block["id"])
                elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    self.results.append((index, number, block["tool_use_id"]))
        return None

    def close(self) -> bytes | None:
        """Check the turn read against the one before, then make it the one before."""
        if self.asked:
            answered = {result[2] for result in self.results}
            if missing := [u for u in self.asked if u not in answered]:
                message = _NO_RESULT.format(index=self.asker, ids=", ".join(missing))
                return error_body("messages", 400, message)
        if self.role == "user" and self.results:
            asked = set(self.asked)
            for index, block, tool_use_id in self.results:
                if tool_use_id not in asked:
                    message = _NO_USE.format(index=index, block=block, id=tool_use_id)
                    return error_body("messages", 400, message)
        self.results.clear()
        if self.role == "assistant" and self.uses:
            self.asker, self.asked, self.uses = self.first, self.uses, []
        else:
            self.asked = _NO_IDS
            self.uses.clear()
        return None


def _chat(body: Mapping[str, object]) -> bytes | None:
    messages: Sequence[Mapping[str, object]] = body.get("messages") or []  # type: ignore[assignment]
    calls: set[str] = set()  # of the assistant message the tool messages since answer
    unanswered: dict[str, None] = {}  # its calls not answered yet, in their order
    caller = -1
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            if caller < 0:
                return _openai(_TOOL_FIRST, f"messages.[{index}].role")
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str) and call_id not in calls:
                return _openai(
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message.",
                    None,
                )
            if isinstance(call_id, str):
                unanswered.pop(call_id, None)
            continue
        if unanswered:
            return _openai(_UNANSWERED + ", ".join(unanswered), f"messages.[{caller}].role")
        asks = message.get("tool_calls") if message.get("role") == "assistant" else None
        ids = _strings(asks, "id")
        calls, unanswered = set(ids), dict.fromkeys(ids)
        caller = index if asks else -1
    return None


def _responses(body: Mapping[str, object]) -> bytes | None:
    items = body.get("input")
    if not isinstance(items, list):
        return None
    calls = set(_strings([i for i in items if i.get("type") == "function_call"], "call_id"))
    outputs = set(
        _strings([i for i in items if i.get("type") == "function_call_output"], "call_id")
    )
    # Outputs may answer calls the request does not hold: those of the response it follows,
    # of the conversation it continues, or of items it names by reference.
    chained = (
        body.get("previous_response_id") is not None
        or body.get("conversation") is not None
        or any(_is_reference(item) for item in items)
    )
    for item in items:
        call_id, kind = item.get("call_id"), item.get("type")
        if not isinstance(call_id, str):
            continue
        if kind == "function_call" and call_id not in outputs:
            message = f"No tool output found for function call {call_id}."
        elif kind == "function_call_output" and not chained and call_id not in calls:
            message = f"No tool call found for function call output with call_id {call_id}."
        else:
            continue
        return _openai(message, "input")
    return None


def _is_reference(item: Mapping[str, object]) -> bool:
    """Whether *item* names a stored item by its id: its ``type`` is optional."""
    return item.get("type", "item_reference") in ("item_reference", None) and "id" in item


def _messages(body: Mapping[str, object]) -> bytes | None:
    turns = _Turns()
    messages: Sequence[Mapping[str, object]] = body.get("messages") or []  # type: ignore[assignment]
    for index, message in enumerate(messages):
        if (refused := turns.read(index, message)) is not None:
            return refused
    return turns.close()


_CHECKS: dict[Api, Callable[[Mapping[str, object]], bytes | None]] = {
    "chat": _chat,
    "responses": _responses,
    "messages": _messages,
}
