"""Each listener's result is checked as it returns, naming the listener (R6.3, R7.37, R9.3)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Coroutine

import pytest

import retinue.hooks._bus
from retinue import Message, Text
from retinue._errors import HookError
from retinue.hooks import Accept, Allow, Ask, Block, Continue, Deny, HookBus, Stop
from retinue.hooks._results import RESULTS
from retinue.hooks._seams import SEAMS
from retinue.prompt import Assembly
from retinue.providers import LlmCallConfig
from retinue.tools import ToolExecution, ToolExecutionResult
from retinue.tools._pipeline_hooks import post_execute, pre_execute
from tests.helpers import Next

# Each seam the bus knows the result of, with a result it takes and what it says it takes.
VALID: dict[str, tuple[object, str]] = {
    "agent/prompt-submit": (Allow(), "Allow or Block"),
    "agent/session-prefix": ((), "a sequence of Message"),
    "agent/request": (LlmCallConfig("m"), "LlmCallConfig"),
    "agent/step-result": (Message("assistant", (Text("hi"),)), "Message"),
    "agent/turn-continuation": (Stop(), "Continue or Stop"),
    "tools/pre-execute": (Deny("no"), "Allow, Deny or Ask"),
    "tools/post-execute": (Block("no"), "Accept or Block"),
    "system-prompt/assemble": (Assembly([], [], {}), "Assembly"),
}


class Policy:
    """Listeners as methods, the way a user with many of them groups them."""

    def check(self, *_args: object) -> object:
        return "deny it"

    async def fail(self, *_args: object) -> None:
        raise ValueError("backup offline")

    async def wrap(self, *args: object) -> object:
        call_next: Next = args[-1]  # type: ignore[assignment]
        try:
            return await call_next()
        except HookError as exc:
            return Deny(str(exc))


@pytest.mark.parametrize("seam", sorted(VALID))
async def test_a_waterfall_listener_returning_what_its_seam_takes_not_is_named(seam: str) -> None:
    """R6.3: a listener's result of the wrong type fails the dispatch with a HookError naming the
    seam, the listener by its qualified name, what it returned and what the seam takes, not the seam
    alone, which leaves a user of many listeners to guess."""
    bus = HookBus()
    value, takes = VALID[seam]
    bus.on(seam, Policy().check)
    with pytest.raises(HookError) as raised:
        await bus.waterfall_value(seam, value, "argument")
    message = str(raised.value)
    assert f"listener ({__name__}.Policy.check) returned 'deny it', not {takes}" in message
    assert message.startswith(f"{'an' if seam[0] == 'a' else 'a'} {seam} listener")
    assert raised.value.code == "INVALID_HOOK_RESULT"


async def test_a_strict_serial_listener_returning_no_verdict_is_named() -> None:
    """R7.37: a turn-stop listener's result other than None or Stop names the listener."""
    bus = HookBus()
    bus.on("agent/turn-stop", lambda *_: None)
    bus.on("agent/turn-stop", functools.partial(Policy.check, Policy()))
    with pytest.raises(
        HookError, match=rf"\({__name__}\.Policy\.check\) returned 'deny it', not None or Stop"
    ):
        await bus.strict_serial("agent/turn-stop", "agent", 1)


async def test_the_result_of_each_listener_is_checked_as_it_returns() -> None:
    """R6.3: an inner listener's wrong result is raised out of the outer one's ``next()``,
    as a raise is, so an outer listener reads only what the seam takes from it."""
    bus = HookBus()
    outer = Policy()
    bus.on("tools/pre-execute", outer.wrap)
    bus.on("tools/pre-execute", lambda *_: 3)
    denied = await bus.waterfall_value("tools/pre-execute", Allow(), "execution")
    assert isinstance(denied, Deny)
    assert "<lambda>) returned 3, not Allow, Deny or Ask" in denied.reason


@pytest.mark.parametrize(
    ("seam", "result"),
    [
        ("tools/pre-execute", Ask()),
        ("tools/pre-execute", Allow()),
        ("tools/post-execute", Accept()),
        ("agent/turn-continuation", Continue()),
        ("agent/session-prefix", [Message("user", (Text("hi"),))]),
    ],
)
async def test_a_listener_returning_what_its_seam_takes_passes(seam: str, result: object) -> None:
    """R6.3: each type the seam takes passes the check, a list of messages as a sequence."""
    bus = HookBus()
    bus.on(seam, lambda *_: result)
    assert await bus.waterfall_value(seam, VALID[seam][0], "argument") is result


async def test_a_parallel_listener_failure_is_noted_with_the_listener_qualified_name() -> None:
    """R6.4: the note on a flush listener's failure names it as a result error does, by its
    qualified name, not by the listener's repr (an address, for a function)."""
    bus = HookBus()
    bus.on("session/flush", Policy().fail)
    with pytest.raises(ValueError, match="backup offline") as raised:
        await bus.parallel("session/flush", "agent", "session")
    assert raised.value.__notes__ == [
        f"raised by a session/flush listener ({__name__}.Policy.fail)"
    ]


async def _relay(*_args: object) -> None:
    pass  # pragma: no cover - never run


def _starts_relay(*args: object) -> Coroutine[object, object, None]:
    return _relay(*args)


def test_a_coroutine_an_emit_listener_returns_is_refused_naming_the_listener(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R6.1, R4.8: the TypeError for a coroutine a plain listener hands back names the listener,
    whose own line no traceback of it shows (it returned), not the seam alone."""
    bus = HookBus()
    bus.on("session/event", _starts_relay)
    bus.on("agent/created", _starts_relay)
    listener = f"{__name__}._starts_relay"
    with pytest.raises(TypeError) as refused:
        bus.emit_raising("session/event", "session", "event")
    assert str(refused.value) == (
        f"session/event listeners must be synchronous: {listener} returned a coroutine"
    )
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        bus.emit("agent/created", "agent")
    [record] = [record for record in caplog.records if record.exc_info]
    assert f"{listener} returned a coroutine" in str(record.exc_info[1])  # type: ignore[index]


def test_every_deciding_seam_but_tools_execute_has_its_results_checked() -> None:
    """R6.3: the loop and the tool pipeline leave a listener's result to the bus's check, so
    every waterfall and strict-serial seam must have one (tools/execute's result is a type
    of the tools layer, which checks it)."""
    deciding = {seam for seam, mode in SEAMS.items() if mode in ("waterfall", "strict-serial")}
    assert set(RESULTS) == deciding - {"tools/execute"}


class _ExitingRepr:
    def __repr__(self) -> str:
        raise SystemExit("repr exits")


async def test_a_wrong_result_whose_repr_raises_system_exit_is_still_refused_naming_it() -> None:
    """R6.3: a result whose repr raises SystemExit is the listener's failure, refused as a HookError
    naming the listener; the SystemExit escapes neither the dispatch nor the runtime."""
    bus = HookBus()
    bus.on("tools/pre-execute", lambda *_args: _ExitingRepr())
    with pytest.raises(HookError, match="returned a _ExitingRepr that cannot be shown"):
        await bus.waterfall_value("tools/pre-execute", Allow(), "execution")


async def test_a_pre_execute_result_the_bus_did_not_check_fails_the_call_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R9.3: were the bus's check of a pre-execute result missing, a result that is no
    decision fails the call rather than letting it run, as a bare Allow would."""
    monkeypatch.setattr(
        retinue.hooks._bus,
        "RESULTS",
        {seam: takes for seam, takes in RESULTS.items() if seam != "tools/pre-execute"},
    )
    bus = HookBus()
    bus.on("tools/pre-execute", lambda *_args: Block("no"))
    prepared = await pre_execute(bus, ToolExecution("c1", "fetch", {}))
    assert not prepared.needs_dispatch
    assert prepared.result is not None
    assert prepared.result.is_error
    assert "tools/pre-execute returned an invalid result: Block" in str(prepared.result.content)


class _ExitingName:
    """A listener whose attributes raise SystemExit as they are read (its name too)."""

    def __getattr__(self, name: str) -> object:
        raise SystemExit(3)

    def __call__(self, *_args: object) -> object:
        return "nope"


async def test_a_listener_whose_name_raises_system_exit_is_still_named_and_refused() -> None:
    """R6.3: a listener whose ``__qualname__`` raises SystemExit as the error names it is named by
    its class, its wrong result refused; the SystemExit does not escape the bus."""
    bus = HookBus()
    bus.on("tools/pre-execute", _ExitingName())
    with pytest.raises(HookError, match=r"_ExitingName.__call__\) returned 'nope'"):
        await bus.waterfall_value("tools/pre-execute", Allow(), "execution")


async def test_a_post_execute_result_the_bus_did_not_check_fails_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R9.3: were the bus's check of a post-execute result missing, a result that is no
    decision is the call's error result, not taken for a Block of the tool's result."""
    monkeypatch.setattr(
        retinue.hooks._bus,
        "RESULTS",
        {seam: takes for seam, takes in RESULTS.items() if seam != "tools/post-execute"},
    )
    bus = HookBus()
    bus.on("tools/post-execute", lambda *_args: Deny("no"))
    answered = ToolExecutionResult("c1", (Text("fine"),))
    final = await post_execute(bus, ToolExecution("c1", "fetch", {}), answered)
    assert final.is_error
    assert "tools/post-execute returned an invalid result: Deny" in str(final.content)
