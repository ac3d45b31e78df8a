"""Mock server policies: echo/tool-using default, scripted, recorded-exchange replay, faults."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Set as AbstractSet
from pathlib import Path
from typing import TypeAlias, final

import attrs

from retinue._checks import collection_error, needs_an_instance

from ._examples import WORDS, example_arguments
from ._fields import check_chunks, check_pause, check_tool_call_count, instances
from ._render import JSON_HEADERS, error_body
from ._timing import Endless
from ._values import (
    FAULT_KINDS,
    Fault,
    FaultKind,
    MockCall,
    MockReply,
    MockResponse,
    MockToolCall,
    RawReply,
    check_fault_kind,
)

__all__ = [
    "EchoPolicy",
    "FaultPolicy",
    "Policy",
    "ReplayPolicy",
    "ScriptedPolicy",
    "example_arguments",
    "load_exchange",
]


Policy: TypeAlias = Callable[[MockCall], MockResponse]
"""Answers one call; may keep state (policies run in the server's trio thread)."""


def _padded(text: str, chunks: int) -> str:
    words = [text] if text else []
    index = 0
    while len(" ".join(words)) < chunks * 6:
        words.append(WORDS[index % len(WORDS)])
        index += 1
    return " ".join(words)


@final
@attrs.define(eq=False)
class EchoPolicy:
    """A model that does realistic work.

    When function tools are offered and no tool results came since its last
    turn, it calls one or up to ``max_tool_calls`` of them with plausible
    arguments (built-in and server tools, run by the provider, are never
    called); after tool results, even when a message such as a
    ``<context>`` note follows them, it answers with text (a prompt after
    them is new input); otherwise it echoes the prompt. Text streams
    in ``chunks`` pieces. Which tools and which arguments are drawn from
    :meth:`MockCall.rng`, so they depend on ``seed`` and the request, not on
    the order concurrent requests arrive in.
    """

    chunks: int = attrs.field(default=4, validator=check_chunks)
    max_tool_calls: int = attrs.field(default=2, validator=check_tool_call_count)
    seed: int = 0

    def __call__(self, call: MockCall) -> MockResponse:
        """Answer *call*, as its ``tool_choice``, parallel calls flag and output limit ask."""
        mode, names = call.tool_choice
        # A tool it must call is called again after results, as the real models do.
        if call.after_tool_results and mode != "required":
            answer = f"Done. The tools said: {' '.join(call.tool_results)[:80]}"
            return self._text(call, answer)
        tools = [t for t in call.tools if names is None or t[0] in names] if mode != "none" else []
        if mode == "required" and not tools:
            # As the real APIs answer a call they could not make.
            wanted = "a tool call" if names is None else f"a call of {', '.join(names)}"
            message = f"tool_choice requires {wanted}, but no such tool is offered"
            return RawReply(400, JSON_HEADERS, error_body(call.api, 400, message))
        if tools and self.max_tool_calls > 0:
            rng = call.rng(self.seed, "echo")
            most = self.max_tool_calls if call.parallel_tool_calls else 1
            count = min(len(tools), 1 + rng.randrange(most))
            chosen = rng.sample(tools, count)
            calls = tuple(
                MockToolCall(name, json.dumps(example_arguments(schema, rng)))
                for name, schema in chosen
            )
            return MockReply(tool_calls=calls, chunks=self.chunks)
        return self._text(call, f"You said: {call.last_text[:200]}")

    def _text(self, call: MockCall, text: str) -> MockReply:
        """A text reply, cut at the request's output limit (finish ``length``) when it is over."""
        text = _padded(text, self.chunks)
        limit = call.max_output_tokens
        if limit is not None and len(text) // 4 > limit:
            # usage counts a token per four characters of output
            return MockReply(text=text[: limit * 4], finish="length", chunks=self.chunks)
        return MockReply(text=text, chunks=self.chunks)


def _response_tuple(responses: Iterable[MockResponse]) -> tuple[MockResponse, ...]:
    # Checked when built: served, another object would fail its request with a 500.
    return instances(
        responses,
        (MockReply, RawReply, Fault, Endless),
        "ScriptedPolicy.responses",
        "MockReply, RawReply, Fault or Endless values",
    )


def _kind_tuple(kinds: Iterable[FaultKind]) -> tuple[FaultKind, ...]:
    # One kind given as a str would be taken for its letters, refused as the kind "s".
    if collection_error(kinds) is not None:
        raise TypeError(f"FaultPolicy.kinds must be a collection of fault kinds, not {kinds!r}")
    if isinstance(kinds, AbstractSet):
        # A set's order follows the str hashes of the process: the seeded draws would not.
        known = tuple(kind for kind in FAULT_KINDS if kind in kinds)
        return known + tuple(kind for kind in kinds if kind not in FAULT_KINDS)  # refused next
    return tuple(kinds)


def _valid_rate(_policy: object, _attribute: object, rate: object) -> None:
    # NaN would never fault and 1.5 always would, both without a word.
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise TypeError(f"FaultPolicy.rate must be a number from 0 to 1, not {rate!r}")
    if not 0 <= rate <= 1:
        raise ValueError(f"FaultPolicy.rate must be a number from 0 to 1, not {rate!r}")


def _callable_policy(_policy: object, _attribute: object, inner: object) -> None:
    # Not callable with a call (a policy class, say), it would fail every request with a 500.
    if not callable(inner) or needs_an_instance(inner, "__call__"):
        raise TypeError(
            f"FaultPolicy.inner must be a policy callable with a MockCall, not {inner!r}"
        )


def _valid_kinds(_policy: object, _attribute: object, kinds: tuple[FaultKind, ...]) -> None:
    for kind in kinds:
        check_fault_kind(kind)


def _flag(policy: object, attribute: attrs.Attribute[bool], value: object) -> None:
    # A truthy non-bool (cycle="no") silently cycled the script.
    if not isinstance(value, bool):
        raise TypeError(f"{type(policy).__name__}.{attribute.name} must be a bool, not {value!r}")


@final
@attrs.define(eq=False)
class ScriptedPolicy:
    """Answers calls with the given responses in order; cycles when ``cycle`` is set."""

    responses: tuple[MockResponse, ...] = attrs.field(converter=_response_tuple)
    cycle: bool = attrs.field(default=False, validator=_flag)
    _position: int = attrs.field(default=0, init=False)

    def __call__(self, _call: MockCall) -> MockResponse:
        """Answer a call with the next response; a 500 once the script is exhausted."""
        if self._position >= len(self.responses):
            if not self.cycle or not self.responses:
                return Fault("server_error")
            self._position = 0
        response = self.responses[self._position]
        self._position += 1
        return response


def load_exchange(path: str | Path) -> dict[str, object]:
    """Load one recorded exchange (the fixtures' JSON format).

    Raises:
        ValueError: the file holds no JSON object, or one the mock server cannot
            replay as recorded (see :meth:`RawReply.from_fixture`), naming the file.
    """
    try:
        with Path(path).open(encoding="utf-8") as handle:
            exchange = json.load(handle)
    except ValueError as exc:  # JSON, or UTF-8, that does not decode
        raise ValueError(f"{path} is not a recorded exchange: {exc}") from exc
    if not isinstance(exchange, dict):
        raise ValueError(f"{path} is not a recorded exchange: it holds no JSON object")
    try:
        RawReply.from_fixture(exchange)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return exchange


def _raw_tuple(replies: Iterable[RawReply]) -> tuple[RawReply, ...]:
    # Checked when built: served, another object would fail its request with a 500.
    return instances(replies, RawReply, "ReplayPolicy.replies", "RawReply values")


@final
@attrs.define(eq=False)
class ReplayPolicy:
    """Serves recorded exchanges byte for byte, in order, cycling."""

    replies: tuple[RawReply, ...] = attrs.field(
        converter=_raw_tuple, validator=attrs.validators.min_len(1)
    )
    _position: int = attrs.field(default=0, init=False)

    @classmethod
    def of(cls, *exchanges: str | Path | Mapping[str, object]) -> ReplayPolicy:
        """Build from fixture paths or already-loaded exchanges."""
        loaded = [e if isinstance(e, Mapping) else load_exchange(e) for e in exchanges]
        return cls(tuple(RawReply.from_fixture(e) for e in loaded))

    def __call__(self, _call: MockCall) -> MockResponse:
        """Answer a call with the next recorded response."""
        reply = self.replies[self._position % len(self.replies)]
        self._position += 1
        return reply


@final
@attrs.define(eq=False)
class FaultPolicy:
    """Wraps a policy and replaces a fraction ``rate`` of its answers with faults.

    The fault kind is drawn uniformly from ``kinds`` (each one of
    :data:`FAULT_KINDS`, or ``ValueError``); stream faults stream the
    wrapped policy's reply before failing. Whether and how a call is faulted
    is drawn from :meth:`MockCall.rng`: with the same ``seed``, the same
    requests get the same faults however concurrent clients interleave, and
    a retry (the same body again) draws afresh. A ``rate`` outside 0 to 1,
    or a ``retry_after`` that is no finite number of seconds >= 0 (or
    ``None``), is refused (``ValueError``), and so is an ``inner`` policy that
    cannot be called (``TypeError``).
    """

    inner: Policy = attrs.field(factory=EchoPolicy, validator=_callable_policy)
    rate: float = attrs.field(default=0.1, validator=_valid_rate)
    kinds: tuple[FaultKind, ...] = attrs.field(
        default=FAULT_KINDS, converter=_kind_tuple, validator=_valid_kinds
    )
    retry_after: float | None = attrs.field(default=1.0, validator=check_pause)
    seed: int = 0
    injected: dict[str, int] = attrs.field(factory=dict, init=False)
    """How many faults of each kind were injected."""

    def __call__(self, call: MockCall) -> MockResponse:
        """Answer *call*, faulted with probability ``rate``."""
        response = self.inner(call)
        rng = call.rng(self.seed, "fault")
        if not self.kinds or rng.random() >= self.rate:
            return response
        kind = rng.choice(self.kinds)
        self.injected[kind] = self.injected.get(kind, 0) + 1
        if isinstance(response, MockReply) and (response.text or response.tool_calls):
            return Fault(kind, self.retry_after, response)
        return Fault(kind, self.retry_after)
