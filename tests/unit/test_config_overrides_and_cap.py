"""Loop configuration after loading: identity overrides and the editable parallel cap
(SPEC R13.5, R13.6)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine

import pytest
import trio

import retinue
from retinue.config import (
    AgentEntry,
    Identity,
    LoopConfig,
    ParallelCapSetting,
    parse_config,
    with_overrides,
)
from retinue.supervisors import bind_parallel_cap
from retinue.testing import Reply, ScriptedModel
from tests.helpers import DEADLINE

# -- R13.5 identity overrides ---------------------------------------------------------------


BASE = LoopConfig(
    agents=(
        AgentEntry("writer", resume_session_id="old-writer", model="m"),
        AgentEntry("reviewer", session_id="old-reviewer"),
        AgentEntry("helper"),
    )
)


def test_with_overrides_replaces_both_identity_keys() -> None:
    """R13.5: an override sets one identity key and clears the other; the rest is kept."""
    config = with_overrides(
        BASE, {"writer": Identity("new-writer"), "reviewer": Identity("r-7", resume=True)}
    )
    assert config.agents == (
        AgentEntry("writer", session_id="new-writer", model="m"),
        AgentEntry("reviewer", resume_session_id="r-7"),
        AgentEntry("helper"),
    )
    assert BASE.agents[0].resume_session_id == "old-writer"


def test_with_overrides_can_give_an_entry_without_identity_one() -> None:
    """R13.5: an entry with no exact id gets the override's identity."""
    config = with_overrides(BASE, {"helper": Identity("helper-1", resume=True)})
    assert config.agents[2] == AgentEntry("helper", resume_session_id="helper-1")


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: Identity(""), "id: must be a valid session id: '' is empty"),
        (lambda: Identity(None), "id: must be a string, got None"),  # type: ignore[arg-type]
        (lambda: Identity(5), "id: must be a string, got 5"),  # type: ignore[arg-type]
        (lambda: Identity(".."), "id: must be a valid session id: '..' is a relative path"),
        (lambda: Identity("a/b"), "id: must be a valid session id: 'a/b' contains a path"),
        (lambda: Identity("s" * 513), "id: must be a valid session id: 'sss"),
        (lambda: Identity("x", resume=1), "resume: must be a boolean, got 1"),  # type: ignore[arg-type]
        (lambda: Identity("x", resume="yes"), "resume: must be a boolean, got 'yes'"),  # type: ignore[arg-type]
        (lambda: Identity("x", resume=None), "resume: must be a boolean, got None"),  # type: ignore[arg-type]
    ],
)
def test_identity_refuses_a_malformed_field_when_built(
    build: Callable[[], object], expected: str
) -> None:
    """R13.2, R13.5: an override's id obeys the stores' session-id rule and ``resume`` is a
    bool, checked at construction with a ConfigError naming the field, not when applied."""
    with pytest.raises(retinue.ConfigError) as raised:
        build()
    assert raised.value.message.startswith(expected)


def test_identity_accepts_the_ids_an_entry_accepts() -> None:
    """R13.5: every id a store holds, up to 512 characters, is a valid override."""
    assert Identity("s" * 512, resume=True).id == "s" * 512
    assert Identity("reviewer-main").resume is False


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        ("new-id", "agents[0] (label 'h'): expected an Identity, got 'new-id'"),
        (None, "agents[0] (label 'h'): expected an Identity, got None"),
        ({"id": "x"}, "agents[0] (label 'h'): expected an Identity, got {'id': 'x'}"),
    ],
)
def test_with_overrides_never_silently_drops_or_keeps_an_identity(
    identity: object, expected: str
) -> None:
    """R13.5: an override replaces the identity with an Identity or raises naming the entry;
    a value that is none, None included, neither clears nor keeps the old identity."""
    base = LoopConfig(agents=(AgentEntry("h", session_id="keep-me"),))
    with pytest.raises(retinue.ConfigError) as raised:
        with_overrides(base, {"h": identity})  # type: ignore[dict-item]
    assert raised.value.message.startswith("invalid identity overrides: ")
    assert expected in raised.value.message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nobody": Identity("x")}, "unknown agent labels: 'nobody'"),
        ({1: Identity("x"), "z": Identity("y")}, "unknown agent labels: 'z', 1"),
        ({"helper": Identity("old-reviewer")}, "agents[2].session_id: session 'old-reviewer'"),
        (
            {"helper": Identity("old-writer", resume=True)},
            "agents[2].resume_session_id: session 'old-writer' is already named by agents[0]",
        ),
        ([("helper", Identity("x"))], "expected a mapping of label to Identity, got [("),
        (None, "expected a mapping of label to Identity, got None"),
    ],
)
def test_with_overrides_rejects_unknown_labels_and_clashing_identities(
    overrides: object, expected: str
) -> None:
    """R13.2, R13.5: overrides obey the load-time rules; the error names the key at fault."""
    with pytest.raises(retinue.ConfigError) as raised:
        with_overrides(BASE, overrides)  # type: ignore[arg-type]
    assert expected in raised.value.message


def test_an_override_for_a_label_several_entries_share_is_refused_as_ambiguous() -> None:
    """R13.5: every entry of a label would get the one identity; the error says why it cannot."""
    shared = parse_config({"agents": [{"id": "a"}, {"id": "b"}, {"id": "a"}]})
    with pytest.raises(retinue.ConfigError) as raised:
        with_overrides(shared, {"a": Identity("same")})
    assert (
        "label 'a' is ambiguous: agents[0] and agents[2] share that label" in raised.value.message
    )
    assert with_overrides(shared, {"b": Identity("own")}).agents[1].session_id == "own"


@pytest.mark.parametrize(
    "config", [{"agents": [{"id": "helper"}]}, "retinue.toml", None], ids=["table", "path", "none"]
)
def test_with_overrides_refuses_a_config_that_is_no_loop_config(config: object) -> None:
    """R13.5: the overrides replace identities of a loaded LoopConfig; a table or a path given
    instead is refused naming the parameter and where a LoopConfig comes from, not with an
    AttributeError on its agents."""
    with pytest.raises(TypeError, match=r"^with_overrides: config must be a LoopConfig \(from "):
        with_overrides(config, {"helper": Identity("x")})  # type: ignore[arg-type]


# -- R13.6 the editable cap -----------------------------------------------------------------


def test_parallel_cap_setting_accepts_valid_writes_and_notifies() -> None:
    """R13.6: a valid write replaces the value and reaches every subscriber."""
    setting = ParallelCapSetting()
    heard: list[int] = []
    unsubscribe = setting.subscribe(heard.append)
    assert setting.value == 10
    setting.value = 3
    unsubscribe()
    unsubscribe()
    setting.value = 5
    assert (setting.value, heard) == (5, [3])


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "4", None])
def test_parallel_cap_setting_refuses_invalid_writes_and_keeps_the_last_good_value(
    bad: object,
) -> None:
    """R13.6: an invalid write raises ConfigError; the value and subscribers are untouched."""
    setting = ParallelCapSetting(4)
    heard: list[int] = []
    setting.subscribe(heard.append)
    with pytest.raises(retinue.ConfigError, match="max_parallel_tool_calls: must be a positive"):
        setting.value = bad  # type: ignore[assignment]
    assert (setting.value, heard) == (4, [])


def test_parallel_cap_setting_contains_a_failing_subscriber(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R13.6: a subscriber failure is logged; the write and later subscribers still happen."""
    setting = ParallelCapSetting(2)
    heard: list[int] = []

    def broken(_value: int) -> None:
        raise RuntimeError("listener bug")

    setting.subscribe(broken)
    setting.subscribe(heard.append)
    setting.value = 6
    assert (setting.value, heard) == (6, [6])
    assert "listener bug" in caplog.text


def test_parallel_cap_setting_refuses_an_invalid_initial_value() -> None:
    """R13.6: the setting never holds an invalid value."""
    with pytest.raises(retinue.ConfigError):
        ParallelCapSetting(0)


async def test_a_subscriber_that_clamps_the_cap_leaves_every_subscriber_on_its_value(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R13.6: a subscriber writing the setting again (a clamp) is the last write every
    subscriber hears, the runtime's live cap included, not the value it replaced."""
    setting = ParallelCapSetting(4)

    def clamp(value: int) -> None:
        if value > 8:
            setting.value = 8

    setting.subscribe(clamp)
    heard: list[int] = []
    setting.subscribe(heard.append)
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=ScriptedModel([Reply("ok")])) as rt:
            bind_parallel_cap(rt, setting)
            setting.value = 20
            assert (setting.value, rt.max_parallel_tool_calls, heard) == (8, 8, [8])


def test_parallel_cap_unsubscribe_removes_its_own_registration_only() -> None:
    """R13.6: a function subscribed twice is two registrations; one's unsubscribe, called
    again as idempotent, leaves the other in place."""
    setting = ParallelCapSetting()
    heard: list[int] = []
    first = setting.subscribe(heard.append)
    setting.subscribe(heard.append)
    first()
    first()
    setting.value = 3
    assert heard == [3]


def test_a_subscriber_unsubscribed_while_a_write_is_told_hears_it_no_more() -> None:
    """R13.6: a subscriber that unsubscribes a later one (say, unbinding a runtime that
    closed) keeps that one from hearing the write it is being told: its unsubscribe has
    returned."""
    setting = ParallelCapSetting()
    heard: list[int] = []
    unsubscribe_later: list[Callable[[], None]] = []
    setting.subscribe(lambda _value: unsubscribe_later[0]())
    unsubscribe_later.append(setting.subscribe(heard.append))
    setting.value = 4
    setting.value = 5
    assert heard == []


async def _async_subscriber(_value: int) -> None:
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    ("subscriber", "refusal"),
    [
        (None, "must be callable, got a value of type NoneType"),
        (_async_subscriber, "are called synchronously"),
    ],
    ids=["not-callable", "async"],
)
def test_parallel_cap_refuses_a_subscriber_it_could_never_run(
    subscriber: Callable[[int], None], refusal: str
) -> None:
    """R13.6: a subscriber that is not callable, or is async (a write calls subscribers
    synchronously), is refused with TypeError when it subscribes, rather than taken for each write
    to log a failure or leave a coroutine never awaited."""
    setting = ParallelCapSetting()
    with pytest.raises(TypeError, match=refusal):
        setting.subscribe(subscriber)


def test_a_subscriber_returning_a_coroutine_fails_with_it_closed_unrun(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R13.6: a plain function returning a coroutine (a lambda over an async function) is a failing
    subscriber, logged, its coroutine closed unrun, not dropped with only a never-awaited warning;
    the write and later subscribers still happen."""
    setting = ParallelCapSetting()
    made: list[Coroutine[object, object, None]] = []

    def starts(value: int) -> None:
        made.append(_async_subscriber(value))
        return made[-1]  # type: ignore[return-value]

    heard: list[int] = []
    setting.subscribe(starts)
    setting.subscribe(heard.append)
    setting.value = 3
    assert (setting.value, heard) == (3, [3])
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    # Named by its code, as a listener is: a repr would show a partial's arguments.
    assert (
        "max_parallel_tool_calls subscribers must be synchronous: "
        f"{__name__}.{test_a_subscriber_returning_a_coroutine_fails_with_it_closed_unrun.__name__}"
        ".<locals>.starts returned a coroutine"
    ) in caplog.text


@pytest.mark.parametrize("raised", [SystemExit(2), GeneratorExit()], ids=["exit", "generator"])
async def test_a_subscriber_raising_a_base_exception_leaves_the_others_told(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture, raised: BaseException
) -> None:
    """R13.6, R6.1: a subscriber raising a BaseException that is no Ctrl-C (argparse's SystemExit in
    a plugin, say) is logged as its failure and the write reaches the bound runtime: it does not
    escape the write and leave the runtime's cap on the old value."""
    setting = ParallelCapSetting(4)

    def plugin(_value: int) -> None:
        raise raised

    setting.subscribe(plugin)
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=ScriptedModel([Reply("ok")])) as rt:
            bind_parallel_cap(rt, setting)
            setting.value = 2
            assert (setting.value, rt.max_parallel_tool_calls) == (2, 2)
    assert "a subscriber of max_parallel_tool_calls failed" in caplog.text
