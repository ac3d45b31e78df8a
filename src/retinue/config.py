"""Loop configuration: a TOML file or a mapping as frozen attrs values (SPEC 13).

Keys are snake_case, the Python spelling of the spec's names
(``maxParallelToolCalls`` is ``max_parallel_tool_calls``, ``resumeSessionId`` is
``resume_session_id``)::

    max_parallel_tool_calls = 4
    [[agents]]
    id = "reviewer"                # the label (required)
    session_id = "reviewer-main"   # restore this session, or create it

Values are checked at load (R13.1, R13.2); unknown keys are errors. Every
problem raises :class:`~retinue.ConfigError` whose message names the file (when
loaded from one) and the key path, e.g. ``agents[2].max_tokens``.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast, final

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from retinue._callables import check_callable
from retinue._checks import collection_error
from retinue._config_checks import (
    MAX_LABEL_LENGTH as MAX_LABEL_LENGTH,  # re-exported for callers of retinue.config
    InvalidValueError,
    InvalidValuesError,
    both_identities,
    check_agent_option,
    check_cap,
    check_cwd,
    check_exact_id,
    check_flag,
    check_label,
    check_name,
    check_session_id,
    duplicate_identities,
    duplicates,
    empty_is_none,
    identity_clash,
    listed_problems,
    named_identity,
)
from retinue._config_file import (
    MAX_CONFIG_BYTES as MAX_CONFIG_BYTES,  # re-exported for callers of retinue.config
    read_toml,
)
from retinue._config_problems import config_problems
from retinue._content import whole
from retinue._errors import ConfigError, synchronous_failure
from retinue._lossless import shown_short
from retinue.hooks._calls import refuse_coroutine
from retinue.loop import DEFAULT_MAX_PARALLEL_TOOL_CALLS

__all__ = [
    "AgentEntry",
    "Identity",
    "LoopConfig",
    "ParallelCapSetting",
    "load_config",
    "parse_config",
    "with_overrides",
]

log = logging.getLogger("retinue.config")


def _as_tuple(agents: object) -> tuple[AgentEntry, ...]:
    if collection_error(agents) is not None:
        raise InvalidValueError(
            "agents", f"expected a sequence of AgentEntry, got {shown_short(agents)}"
        )
    entries = tuple(cast("Iterable[Any]", agents))
    for index, entry in enumerate(entries):
        if not isinstance(entry, AgentEntry):
            raise InvalidValueError(
                f"agents[{index}]", f"expected an AgentEntry, got {shown_short(entry)}"
            )
    return entries


def _unique_identities(
    _instance: object, _attribute: object, agents: tuple[AgentEntry, ...]
) -> None:
    named = (named_identity(entry.session_id, entry.resume_session_id) for entry in agents)
    if found := duplicates(named):
        raise InvalidValuesError(found)


def _listed(value: list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    """A list frozen to a tuple, as a frozen entry holds it; anything else is left for the
    check to refuse."""
    return tuple(value) if isinstance(value, list) else value


@final
@attrs.frozen
class AgentEntry:
    """One agent to start with the loop (R13.1, R13.3)."""

    id: str = attrs.field(validator=check_label)
    """The label: names the entry in overrides and prefixes fresh session ids."""
    session_id: str | None = attrs.field(default=None, kw_only=True, validator=check_session_id)
    """Restore this session if stored, else create it (R13.3)."""
    resume_session_id: str | None = attrs.field(
        default=None, kw_only=True, converter=empty_is_none, validator=check_session_id
    )
    """Resume this stored session; empty means absent."""
    cwd: str | None = attrs.field(default=None, kw_only=True, converter=whole, validator=check_cwd)
    """The agent's working directory (absolute); a stored session keeps its own, and an
    entry naming another fails to start it."""
    provider: str | None = attrs.field(default=None, kw_only=True, validator=check_name)
    """The provider half of the model route."""
    model: str | None = attrs.field(default=None, kw_only=True, validator=check_name)
    """The model name."""
    max_tokens: int | None = attrs.field(default=None, kw_only=True, validator=check_agent_option)
    """The per-request output limit, 1..2**53-1."""
    temperature: float | None = attrs.field(
        default=None, kw_only=True, validator=check_agent_option
    )
    """The sampling temperature, a finite number, not negative."""
    stop: tuple[str, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_listed, validator=check_agent_option
    )
    """Stop sequences, non-empty strings."""
    system_prompt: str | None = attrs.field(
        default=None, kw_only=True, validator=check_agent_option
    )
    """The agent's persona, a template with ``{{variables}}``."""
    max_steps: int | None = attrs.field(default=None, kw_only=True, validator=check_agent_option)
    """The most steps one turn may take, 1..2**53-1 (``AgentOptions.max_steps``)."""
    max_prompts_per_turn: int | None = attrs.field(
        default=None, kw_only=True, validator=check_agent_option
    )
    """The most queued prompts one turn takes, 1..2**53-1
    (``AgentOptions.max_prompts_per_turn``)."""

    def __attrs_post_init__(self) -> None:
        if (clash := identity_clash(self.session_id, self.resume_session_id)) is not None:
            raise clash

    @property
    def identity(self) -> str | None:
        """The exact session id this entry names, if any."""
        return self.session_id or self.resume_session_id


@final
@attrs.frozen
class LoopConfig:
    """The loop's configuration: the tool-call cap and the agents to start (R13.1)."""

    max_parallel_tool_calls: int = attrs.field(
        default=DEFAULT_MAX_PARALLEL_TOOL_CALLS, validator=check_cap
    )
    """How many tool calls of one step may run at once (at least 1)."""
    agents: tuple[AgentEntry, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=_unique_identities
    )
    """The agents to start, in order; no two name the same session (R13.2)."""


@final
@attrs.frozen
class Identity:
    """A launcher's identity for one entry (R13.5): create-or-restore *id*, or resume it.

    Checked when built: a malformed value raises :class:`~retinue.ConfigError`
    naming the field, before any override uses it.
    """

    id: str = attrs.field(validator=check_exact_id)
    """The exact session id, by the stores' rule (non-empty, no path separator, ...)."""
    resume: bool = attrs.field(default=False, kw_only=True, validator=check_flag)
    """Resume the stored session *id* instead of restoring or creating it."""


@final
@attrs.define(eq=False)
class ParallelCapSetting:
    """``max_parallel_tool_calls`` as a user-editable setting (R13.6).

    Writing an invalid value to :attr:`value` raises :class:`~retinue.ConfigError`
    and keeps the last good value; subscribers hear every accepted write, in
    order: one a subscriber makes (a clamp) is the last each of them hears, and one
    unsubscribed, even by another while a write is being told, hears no more.
    A subscriber's failure (a ``SystemExit`` too, anything but Ctrl-C) is logged
    and the others are still told. Nothing here blocks.
    """

    _value: int = attrs.field(
        default=DEFAULT_MAX_PARALLEL_TOOL_CALLS, alias="value", validator=check_cap
    )
    # Each registration with a token of its own: the same function may be subscribed twice,
    # and one unsubscribe must remove its own registration only.
    _subscribers: list[tuple[object, Callable[[int], None]]] = attrs.field(factory=list, init=False)
    # Accepted writes so far: a subscriber may write again (a clamp), and every subscriber
    # has then heard that newer value, which the rest must not be told after it.
    _writes: int = attrs.field(default=0, init=False)

    @property
    def value(self) -> int:
        """The last good value."""
        return self._value

    @value.setter
    def value(self, value: int) -> None:
        self._value = value  # validated on set: an invalid value raises and is not stored
        self._writes += 1
        write = self._writes
        for registration in list(self._subscribers):
            if self._writes != write:
                return
            if registration not in self._subscribers:
                continue  # unsubscribed by one heard before it: its unsubscribe has returned
            _token, fn = registration
            try:
                _told(fn, value)
            except BaseException as exc:
                # A SystemExit too, as a notification's listener (R6.1): raised on, it would
                # leave the subscribers after it (a bound runtime's cap) on the old value.
                if not synchronous_failure(exc):
                    raise
                log.exception("a subscriber of max_parallel_tool_calls failed (contained)")

    def subscribe(self, fn: Callable[[int], None]) -> Callable[[], None]:
        """Call *fn* with every accepted value; returns an idempotent unsubscribe.

        Raises:
            TypeError: *fn* is not callable, or is a generator or an ``async def``
                function: a write calls subscribers synchronously, so its body
                would never run.
        """
        check_callable(fn, "max_parallel_tool_calls subscribers", synchronous=True)
        registration = (object(), fn)
        self._subscribers.append(registration)

        def unsubscribe() -> None:
            for index, held in enumerate(self._subscribers):
                if held is registration:
                    del self._subscribers[index]
                    return

        return unsubscribe


def _told(fn: Callable[[int], object], value: int) -> None:
    """Call subscriber *fn* with *value*; a coroutine it returns is closed unrun, its failure.

    A lambda over an async function passes subscribe's check; left alone, its coroutine
    would never run, and only warn of being never awaited.
    """
    refuse_coroutine("max_parallel_tool_calls", fn, fn(value), "subscribers")


def _strict(kind: type, expected: str) -> Callable[[object, object], object]:
    def structure(value: object, _type: object) -> object:
        if type(value) is not kind:
            raise InvalidValueError("", f"expected {expected}, got {shown_short(value)}")
        return value

    return structure


def _number(value: object, _type: object) -> float:
    """A TOML float or integer as a float; a bool or a string is refused, not converted."""
    if type(value) not in (int, float):
        raise InvalidValueError("", f"expected a number, got {shown_short(value)}")
    return float(value)  # type: ignore[arg-type]


def _string_array(value: object, type_: object) -> object:
    """An array of strings; a bare string is refused, not split into characters."""
    if not isinstance(value, list | tuple):
        raise InvalidValueError("", f"expected an array of strings, got {shown_short(value)}")
    return _strings(value, type_)


_CrossCheck = Callable[[Mapping[str, object]], list[Exception]]


def _table(cls: type, across: _CrossCheck | None = None) -> Callable[[object, object], object]:
    """Structure a table of *cls*; on failure, collect every problem of it.

    *across* checks what spans several keys of the table as given: the
    constructor checks it only when every key built, so a failure elsewhere
    would hide it. A problem it finds again is listed once (:func:`parse_config`).
    """
    generated: Callable[[Mapping[str, object], type], object] = make_dict_structure_fn(
        cls, _converter, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True
    )

    def structure(value: object, _type: object) -> object:
        if not isinstance(value, Mapping):
            raise InvalidValueError("", f"expected a table, got {shown_short(value)}")
        try:
            return generated(value, cls)
        except (cattrs.ClassValidationError, InvalidValueError, InvalidValuesError) as exc:
            more = _value_problems(cls, value, exc) + (across(value) if across else [])
            if not more:
                raise
            raise cattrs.ClassValidationError(
                f"While structuring {cls.__name__}", [exc, *more], cls
            ) from None

    return structure


def _failed_fields(exc: Exception) -> set[str]:
    """The fields of a table that *exc* already reports a problem for."""
    if isinstance(exc, InvalidValueError):
        return {exc.key.split("[")[0].split(".")[0]}
    if isinstance(exc, InvalidValuesError):
        return set().union(*(_failed_fields(problem) for problem in exc.problems))
    if not isinstance(exc, cattrs.ClassValidationError):
        return set()  # e.g. unknown keys: they name no field
    named, unplaced = exc.group_exceptions()  # unplaced: what the constructor raised
    return {note.name for _, note in named}.union(*(_failed_fields(sub) for sub in unplaced))


def _value_problems(cls: type, value: Mapping[str, object], exc: Exception) -> list[Exception]:
    """Run the value checks of the fields that did not fail.

    cattrs builds a table, and so runs its validators, only when every field
    structured; without this, one wrongly typed key would hide every value
    problem beside it.
    """
    failed = _failed_fields(exc)
    found: list[Exception] = []
    for field in attrs.fields(attrs.resolve_types(cls)):
        if field.name in failed or field.name not in value or field.validator is None:
            continue
        try:
            checked = _converter.structure(value[field.name], field.type)
        except (cattrs.BaseValidationError, ConfigError):
            continue  # its own type or nested problem is already reported
        if field.converter is not None:
            checked = field.converter(checked)
        try:
            field.validator(None, field, checked)
        except (InvalidValueError, InvalidValuesError) as problem:
            found.append(problem)
    return found


def _array(value: object, type_: object) -> object:
    if not isinstance(value, list | tuple):
        raise InvalidValueError("", f"expected an array of tables, got {shown_short(value)}")
    return _entries(value, type_)


_converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
_converter.register_structure_hook(int, _strict(int, "an integer"))
_converter.register_structure_hook(str, _strict(str, "a string"))
_converter.register_structure_hook(float, _number)
_strings = _converter.get_structure_hook(tuple[str, ...])
_converter.register_structure_hook_func(lambda type_: type_ == tuple[str, ...], _string_array)
_entries = _converter.get_structure_hook(tuple[AgentEntry, ...])
_converter.register_structure_hook_func(lambda type_: type_ == tuple[AgentEntry, ...], _array)
_converter.register_structure_hook(AgentEntry, _table(AgentEntry, both_identities))
_converter.register_structure_hook(LoopConfig, _table(LoopConfig, duplicate_identities))


def _where(source: str | os.PathLike[str] | None) -> str:
    return "" if source is None else f" in {os.fspath(source)}"


def parse_config(
    data: Mapping[str, object], *, source: str | os.PathLike[str] | None = None
) -> LoopConfig:
    """Check *data* (e.g. a parsed TOML document) and build a :class:`LoopConfig`.

    *source* (a file path) is named in error messages. Raises
    :class:`~retinue.ConfigError` listing every problem with its key path.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"invalid configuration{_where(source)}: expected a table")
    try:
        return _converter.structure(data, LoopConfig)
    except (cattrs.BaseValidationError, ConfigError) as exc:
        # dict.fromkeys: a problem two checks found (a constructor's and a cross
        # check's) is listed once, in the order found.
        problems = listed_problems(list(dict.fromkeys(config_problems(exc))))
        raise ConfigError(f"invalid configuration{_where(source)}: {problems}") from exc


def load_config(path: str | os.PathLike[str]) -> LoopConfig:
    """Read a TOML file and build a :class:`LoopConfig`.

    Reads the file synchronously: call it before ``trio.run`` or through
    ``trio.to_thread.run_sync``. Raises :class:`~retinue.ConfigError` naming
    the file for an unreadable file, one larger than :data:`MAX_CONFIG_BYTES`,
    invalid TOML or invalid values, and
    ``TypeError`` for a *path* that is neither a ``str`` nor an
    ``os.PathLike`` (an int would be opened as a file descriptor, and closed).
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or an os.PathLike, got {type(path).__name__}")
    data = read_toml(path)
    return parse_config(data, source=path)


def _apply(entry: AgentEntry, identity: Identity) -> AgentEntry:
    if identity.resume:
        return attrs.evolve(entry, session_id=None, resume_session_id=identity.id)
    return attrs.evolve(entry, session_id=identity.id, resume_session_id=None)


def _overridden(index: int, entry: AgentEntry, overrides: Mapping[str, object]) -> AgentEntry:
    """*entry* with the identity *overrides* gives its label, if it gives one.

    An :class:`Identity` checked its fields when built; what only this place
    can tell is which entry a value that is no Identity was meant for. A None
    counts: skipping it would keep the entry's old identity unnoticed.
    """
    if entry.id not in overrides:
        return entry
    identity = overrides[entry.id]
    if not isinstance(identity, Identity):
        raise ConfigError(
            f"invalid identity overrides: agents[{index}] (label {entry.id!r}): "
            f"expected an Identity, got {shown_short(identity)}"
        )
    return _apply(entry, identity)


def _check_labels(config: LoopConfig, overrides: object) -> None:
    if not isinstance(overrides, Mapping):
        raise ConfigError(
            f"invalid identity overrides: expected a mapping of label to Identity, got "
            f"{shown_short(overrides)}"
        )
    labels = Counter(entry.id for entry in config.agents)
    # Shown by repr: a key that is no string is unknown too, and must not be
    # mistaken for the label its text spells.
    unknown = sorted(shown_short(label) for label in overrides if label not in labels)
    if unknown:
        raise ConfigError(f"identity overrides name unknown agent labels: {', '.join(unknown)}")
    for label in overrides:
        if labels[label] > 1:
            # Every entry of a label gets its override: one session id cannot be several agents.
            shared = [index for index, entry in enumerate(config.agents) if entry.id == label]
            where = " and ".join(f"agents[{index}]" for index in shared)
            raise ConfigError(
                f"identity override for label {label!r} is ambiguous: {where} share that label, "
                "and one session cannot be several agents; give them labels of their own"
            )


def with_overrides(config: LoopConfig, overrides: Mapping[str, Identity]) -> LoopConfig:
    """Replace both identity keys of each entry whose label *overrides* names (R13.5).

    Raises :class:`~retinue.ConfigError` for overrides that are not a mapping,
    a label no entry has or several entries share, a value that is not an
    :class:`Identity`, or two entries left naming the same session, and
    ``TypeError`` for a *config* that is no :class:`LoopConfig`.
    """
    if not isinstance(config, LoopConfig):
        # A table or a path read as one would fail on its missing agents, naming neither.
        raise TypeError(
            "with_overrides: config must be a LoopConfig (from parse_config or load_config), "
            f"got {shown_short(config)}"
        )
    _check_labels(config, overrides)
    agents = tuple(
        _overridden(index, entry, overrides) for index, entry in enumerate(config.agents)
    )
    try:
        return attrs.evolve(config, agents=agents)
    except ConfigError as exc:
        raise ConfigError(f"invalid identity overrides: {exc}") from exc
