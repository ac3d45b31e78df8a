"""Start the agents a loop configuration lists, owned by the runtime (R12.11, R13.3, R13.4)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, final

import attrs
import trio

from retinue._errors import RetinueError
from retinue._fresh_ids import fresh_id
from retinue._lossless import shown_short
from retinue._options import AgentOptions
from retinue.config import AgentEntry, LoopConfig, ParallelCapSetting

from ._runtime import Runtime

if TYPE_CHECKING:
    from retinue.actors import Agent

__all__ = [
    "CONFIG_START_FAILED",
    "ConfigStartFailure",
    "bind_parallel_cap",
    "start_configured_agents",
]

log = logging.getLogger("retinue.supervisors")
CONFIG_START_FAILED: Final = "agent-loop/config-start-failed"
"""The seam a configured agent that fails to start is reported on."""


@final
@attrs.frozen
class ConfigStartFailure:
    """The payload of ``agent-loop/config-start-failed`` (R13.4)."""

    session_id: str
    """The session the entry was to start."""
    error: Exception
    """Why it did not start."""
    label: str
    """The entry's label (``id`` in the configuration)."""


async def start_configured_agents(rt: Runtime, config: LoopConfig) -> tuple[Agent, ...]:
    """Start every agent *config* lists, one after another (R13.3); returns those that started.

    Per entry: no exact id creates a fresh ``<id>-session-<uuid4>``;
    ``session_id`` restores the stored session or, if the store does not have
    it (one ``exists`` lookup, never a listing), creates it: on every store, a
    :class:`~retinue.MemoryStore` too, which holds what an earlier runtime
    stored in it if the caller held it open (a runtime closes its store).
    ``resume_session_id`` resumes. A stored session keeps its cwd, so an
    entry whose ``cwd`` differs fails (``SessionError(CWD_MISMATCH)``). A
    failure is contained (R13.4): logged and reported as
    ``agent-loop/config-start-failed`` with a :class:`ConfigStartFailure`,
    unless the runtime is shutting down.

    Agents are published in entry order. Waits until every entry has started
    or failed; always a checkpoint. Cancellation leaves the agents already
    published running and starts no more. Raises ``TypeError`` for an *rt*
    that is no :class:`Runtime` or a *config* that is no :class:`LoopConfig`,
    before any entry is tried.
    """
    _check_runtime("start_configured_agents", rt)
    if not isinstance(config, LoopConfig):
        raise TypeError(
            "start_configured_agents: config must be a LoopConfig (from parse_config or "
            f"load_config), got {shown_short(config)}"
        )
    await trio.lowlevel.checkpoint()
    started: list[Agent] = []
    for entry in config.agents:
        session_id = entry.identity or fresh_id(entry.id)
        try:
            started.append(await _start_entry(rt, entry, session_id))
        except Exception as exc:
            _report(rt, ConfigStartFailure(session_id, exc, entry.id))
    return tuple(started)


def bind_parallel_cap(rt: Runtime, setting: ParallelCapSetting) -> Callable[[], None]:
    """Make *setting* the live ``max_parallel_tool_calls`` of *rt* (R13.6); never blocks.

    The current value applies at once and every accepted write applies to the
    next batch of tool calls; a refused write leaves the scheduler on the last
    good value. Returns a function that unbinds. Raises ``TypeError`` for an
    *rt* that is no :class:`Runtime` or a *setting* that is no
    :class:`~retinue.config.ParallelCapSetting`.
    """
    _check_runtime("bind_parallel_cap", rt)
    if not isinstance(setting, ParallelCapSetting):
        raise TypeError(
            f"bind_parallel_cap: setting must be a ParallelCapSetting, got {shown_short(setting)}"
        )

    def apply(value: int) -> None:
        rt.max_parallel_tool_calls = value

    apply(setting.value)
    return setting.subscribe(apply)


def _check_runtime(function: str, rt: object) -> None:
    # Checked up front: another value fails every entry alike, and then the report
    # of the failure, which reads the runtime too.
    if not isinstance(rt, Runtime):
        raise TypeError(
            f"{function}: rt must be a Runtime (from open_runtime), got {shown_short(rt)}"
        )


def _options(entry: AgentEntry) -> AgentOptions:
    return AgentOptions(
        model=entry.model,
        provider=entry.provider,
        max_tokens=entry.max_tokens,
        cwd=entry.cwd,
        temperature=entry.temperature,
        stop=entry.stop,
        system_prompt=entry.system_prompt,
        max_steps=entry.max_steps,
        max_prompts_per_turn=entry.max_prompts_per_turn,
    )


async def _start_entry(rt: Runtime, entry: AgentEntry, session_id: str) -> Agent:
    options = _options(entry)
    if entry.resume_session_id is not None:
        return await rt.resume_agent(session_id, options)
    if entry.session_id is not None:
        return await _restore_or_create(rt, entry.id, session_id, options)
    return await rt.create_agent(entry.id, options, session_id=session_id)


async def _restore_or_create(
    rt: Runtime, label: str, session_id: str, options: AgentOptions
) -> Agent:
    """Resume *session_id*; if the store does not have it, create it instead."""
    try:
        return await rt.resume_agent(session_id, options)
    except Exception:
        if await rt.store.exists(session_id):
            raise  # the session is stored: the failure is real
    return await rt.create_agent(label, options, session_id=session_id)


def _report(rt: Runtime, failure: ConfigStartFailure) -> None:
    if rt.closing:
        log.info("configured agent %s not started: shutting down", failure.session_id)
        return
    # A typed error names what is wrong (a session not stored, a bad option): its
    # traceback would only show the store's threads. Anything else may be a bug.
    typed = isinstance(failure.error, RetinueError)
    log.error(
        "configured agent %s (%s) failed to start: %r",
        failure.session_id,
        failure.label,
        failure.error,
        exc_info=None if typed else failure.error,
    )
    rt.hooks.emit(CONFIG_START_FAILED, failure, scope=failure.session_id)
