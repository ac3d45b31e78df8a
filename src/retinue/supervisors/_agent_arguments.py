"""The checks of the options an agent is created, resumed or forked with."""

from __future__ import annotations

import os

import attrs

from retinue._errors import ConfigError, SessionError, StoreError
from retinue._fresh_ids import fresh_id
from retinue._lossless import shown
from retinue._options import AgentOptions
from retinue.actors import Agent
from retinue.session import Session
from retinue.stores import check_session_id
from retinue.tools import ToolRegistry

from ._arguments import tools_of
from ._creation import Setup

__all__ = [
    "check_kept_cwd",
    "check_loaded",
    "check_setup",
    "checked_id",
    "loaded_session",
    "new_agent_id",
    "options_of",
    "with_cwd",
    "with_tools",
]


def options_of(options: object) -> AgentOptions:
    """*options*, or the defaults for None; refused when they are no :class:`AgentOptions`."""
    if options is None:
        return AgentOptions()
    if not isinstance(options, AgentOptions):
        raise TypeError(f"options must be an AgentOptions or None, got {type(options).__name__}")
    return options


def check_setup(setup: object) -> None:
    """Refuse a *setup* that is neither None nor callable, before any session is made or
    loaded: called only then, it would fail as the call of its value, naming no argument."""
    if setup is not None and not callable(setup):
        raise TypeError(f"setup must be a callable taking the agent, or None, got {shown(setup)}")


def with_cwd(options: AgentOptions, cwd: str | None) -> AgentOptions:
    """*options* with ``create_agent``'s *cwd* keyword, checked as ``AgentOptions(cwd=...)`` is.

    A *cwd* that differs from ``options.cwd`` is refused: taking either one
    would drop the other unseen.
    """
    if cwd is None:
        return options
    given = attrs.evolve(options, cwd=cwd)  # refused in AgentOptions' own words if invalid
    # Compared as held: the options hold a surrogate pair joined, as given.cwd does.
    if options.cwd is not None and options.cwd != given.cwd:
        raise ConfigError(
            f"cwd {cwd!r} conflicts with options.cwd {options.cwd!r}: give the cwd once"
        )
    return given


def check_kept_cwd(session: Session, options: AgentOptions, *, how: str) -> None:
    """Refuse *options* naming a cwd other than the one *session*'s header holds (R11.15).

    A resumed or forked session keeps its header's cwd (``{{cwd}}`` and the
    log say so); accepting another would leave ``options.cwd`` reporting a
    directory the agent does not work in. *how* says which session it is
    ("resumed", "forked"). A trailing slash, a ``.`` or a doubled separator
    makes no other directory; a ``..`` may (through a link), so it does.
    """
    kept = session.header.cwd
    if options.cwd is None or options.cwd == kept:
        return
    if kept is not None and _plain(options.cwd) == _plain(kept):
        return
    held = "no cwd" if kept is None else f"cwd {kept!r}"
    raise SessionError(
        f"session {session.id!r} has {held}, but options.cwd is {options.cwd!r}: "
        f"a {how} session keeps the cwd of its header",
        code="CWD_MISMATCH",
    )


def _plain(path: str) -> str:
    """*path* without its ``.`` parts, doubled separators and trailing slash, as
    ``os.path.normpath`` writes it; *path* itself when it has a ``..`` part, which only
    the file system can resolve (the part before it may be a link)."""
    if ".." in path.split(os.sep):
        return path
    return os.path.normpath(path)


def loaded_session(loaded: object, agent_id: str) -> Session:
    """What the store's ``load`` of *agent_id* returned, refused unless it is a
    :class:`Session`: anything else fails later, naming no store."""
    if not isinstance(loaded, Session):
        raise StoreError(
            f"the store's load of session {agent_id!r} returned {shown(loaded)}, not a Session",
            code="CORRUPT_SESSION",
        )
    return loaded


def check_loaded(session: Session, agent_id: str) -> None:
    """Refuse a *session* loaded for *agent_id* that is another id's, or ends inside a turn (R11.9).

    A store's ``load`` closes a crashed turn (``retinue.stores.repair_tail``
    gives the closing events); a store that does not would leave every later
    turn of the agent refused as opened inside the open one.
    """
    if session.id != agent_id:
        raise StoreError(
            f"the store's load of session {agent_id!r} returned the session {session.id!r}",
            code="CORRUPT_SESSION",
        )
    if session.is_turn_open:
        raise StoreError(
            f"the store's load of session {session.id!r} left turn {session.last_turn} open: "
            "a load closes a crashed turn (retinue.stores.repair_tail gives its closing events)",
            code="OPEN_TURN",
        )


def checked_id(agent_id: object) -> str:
    """*agent_id* if a store can hold it, else ``SessionError(INVALID_SESSION_ID)``.

    Checked before the id is looked up anywhere: an unhashable one would raise
    a bare ``TypeError`` there.
    """
    try:
        return check_session_id(agent_id)
    except StoreError as exc:
        raise SessionError(exc.message, code="INVALID_SESSION_ID") from exc


def new_agent_id(name: object, session_id: str | None) -> str:
    """*session_id*, else a fresh id labelled *name*; a name that cannot label one is refused.

    Checked even beside a *session_id*: the name is required, and an empty one
    would begin a fresh id with its separator (``-session-<uuid4>``).
    """
    if not isinstance(name, str) or not name:
        raise SessionError(
            f"name must be a non-empty str labelling the agent, got {shown(name)}",
            code="INVALID_SESSION_ID",
        )
    if session_id is not None:
        return session_id
    agent_id = fresh_id(name)
    try:
        return check_session_id(agent_id)
    except StoreError as exc:
        raise SessionError(
            f"name {shown(name)} cannot label a session: {exc.message}", code="INVALID_SESSION_ID"
        ) from exc


def with_tools(registry: ToolRegistry, tools: object, setup: Setup | None) -> Setup | None:
    """*setup*, giving the agent *tools* of its own first (``registry.add(tool, agent=...)``).

    *tools* are checked before any session is made or loaded, as
    ``open_runtime``'s are: anything but a collection of
    :class:`~retinue.tools.Tool` (a bare Tool, a str), or two of one name, raises
    ``ConfigError``. Registered in the setup, they go with the agent's teardown,
    or with its creation if that fails.
    """
    if tools is None:
        return setup
    given = tools_of(tools)
    if not given:
        return setup

    def give_tools(agent: Agent) -> object:
        for tool in given:
            registry.add(tool, agent=agent)
        return None if setup is None else setup(agent)

    return give_tools
