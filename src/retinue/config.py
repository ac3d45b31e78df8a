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
import tomllib
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast, final

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from retinue._checks import collection_error
from retinue._errors import ConfigError
from retinue._options import MAX_SAFE_INTEGER, cwd_problem, name_problem
from retinue.loop import DEFAULT_MAX_PARALLEL_TOOL_CALLS
from retinue.stores._ids import MAX_ID_LENGTH, id_problem

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
# An entry without an exact id runs as ``<label>-session-<uuid4>`` (R13.3), an id
# a store must accept: the label has to leave room for the suffix.
_FRESH_SUFFIX = f"-session-{uuid.UUID(int=0)}"
MAX_LABEL_LENGTH = MAX_ID_LENGTH - len(_FRESH_SUFFIX)


class _InvalidValueError(ConfigError):
    """A problem at *key* (relative to where it was found): ``"<key>: <reason>"``."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


class _InvalidValuesError(ConfigError):
    """Several problems one check found, each an :class:`_InvalidValueError`."""

    def __init__(self, problems: Iterable[_InvalidValueError]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problem.message for problem in self.problems))


def _check_cap(_instance: object, _attribute: object, value: int) -> None:
    if type(value) is not int or value < 1:
        raise _InvalidValueError(
            "max_parallel_tool_calls", f"must be a positive integer, got {value!r}"
        )


def _check_max_tokens(_instance: object, _attribute: object, value: int | None) -> None:
    if value is not None and (type(value) is not int or not 0 < value <= MAX_SAFE_INTEGER):
        raise _InvalidValueError("max_tokens", f"must be an integer in 1..2**53-1, got {value!r}")


def _shown(value: object) -> str:
    text = repr(value)
    if isinstance(value, str) and len(text) > 60:
        return f"{text[:40]}...' ({len(value)} characters)"
    return text


def _session_id_problem(value: object) -> str | None:
    """Why *value* cannot be a session id (the stores' own rule, R11.12), or None."""
    if not isinstance(value, str):
        return f"must be a string, got {_shown(value)}"
    problem = id_problem(value)
    return None if problem is None else f"must be a valid session id: {_shown(value)} {problem}"


def _label_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {_shown(value)}"
    if not value:
        return "must be a non-empty label, got ''"
    if len(value) > MAX_LABEL_LENGTH:
        return (
            f"must be at most {MAX_LABEL_LENGTH} characters, got {len(value)}: a fresh session "
            f"id '<label>-session-<uuid4>' must fit in {MAX_ID_LENGTH}"
        )
    problem = id_problem(value + _FRESH_SUFFIX)
    return None if problem is None else f"must be a valid label: {_shown(value)} {problem}"


def _check_label(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    # Typed as object: a value built in Python (not read from TOML) may be anything.
    if (problem := _label_problem(value)) is not None:
        raise _InvalidValueError(attribute.name, problem)


def _check_session_id(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value is not None and (problem := _session_id_problem(value)) is not None:
        raise _InvalidValueError(attribute.name, problem)


def _check_exact_id(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    # Unlike an entry's optional ids, an override's id is required: empty or
    # missing would read as "no identity" and quietly clear the entry's.
    if (problem := _session_id_problem(value)) is not None:
        raise _InvalidValueError(attribute.name, problem)


def _check_flag(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if type(value) is not bool:
        raise _InvalidValueError(attribute.name, f"must be a boolean, got {_shown(value)}")


def _check_cwd(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None and (problem := cwd_problem(value)) is not None:
        raise _InvalidValueError("cwd", problem)


def _check_name(_instance: object, attribute: attrs.Attribute[str], value: str | None) -> None:
    if value is not None and (problem := name_problem(value)) is not None:
        raise _InvalidValueError(attribute.name, problem)


def _empty_is_none(value: str | None) -> str | None:
    return None if value == "" else value


def _identity_clash(session_id: object, resume_session_id: object) -> _InvalidValueError | None:
    """The problem of an entry naming both identities (R13.2); an empty resume id is absent."""
    if session_id is None or resume_session_id in (None, ""):
        return None
    return _InvalidValueError("resume_session_id", "cannot be combined with session_id")


def _named_identity(session_id: object, resume_session_id: object) -> tuple[str, object]:
    """The key an entry names its session by, and what it gives there (None or "" for none)."""
    if session_id is not None:
        return "session_id", session_id
    return "resume_session_id", resume_session_id


def _duplicates(named: Iterable[tuple[str, object]]) -> list[_InvalidValueError]:
    """One problem per entry naming a session an earlier entry names (R13.2).

    *named* holds each entry's :func:`_named_identity`, in order; an id that
    is not a string is left to its own problem.
    """
    first: dict[str, int] = {}
    found: list[_InvalidValueError] = []
    for index, (key, identity) in enumerate(named):
        if not isinstance(identity, str) or not identity:
            continue
        if identity in first:
            reason = f"session {identity!r} is already named by agents[{first[identity]}]"
            found.append(_InvalidValueError(f"agents[{index}].{key}", reason))
        else:
            first[identity] = index
    return found


def _as_tuple(agents: object) -> tuple[AgentEntry, ...]:
    if collection_error(agents) is not None:
        raise _InvalidValueError("agents", f"expected a sequence of AgentEntry, got {agents!r}")
    entries = tuple(cast("Iterable[Any]", agents))
    for index, entry in enumerate(entries):
        if not isinstance(entry, AgentEntry):
            raise _InvalidValueError(f"agents[{index}]", f"expected an AgentEntry, got {entry!r}")
    return entries


def _unique_identities(
    _instance: object, _attribute: object, agents: tuple[AgentEntry, ...]
) -> None:
    named = (_named_identity(entry.session_id, entry.resume_session_id) for entry in agents)
    if duplicates := _duplicates(named):
        raise _InvalidValuesError(duplicates)


@final
@attrs.frozen
class AgentEntry:
    """One agent to start with the loop (R13.1, R13.3)."""

    id: str = attrs.field(validator=_check_label)
    """The label: names the entry in overrides and prefixes fresh session ids."""
    session_id: str | None = attrs.field(default=None, kw_only=True, validator=_check_session_id)
    """Restore this session if stored, else create it (R13.3)."""
    resume_session_id: str | None = attrs.field(
        default=None, kw_only=True, converter=_empty_is_none, validator=_check_session_id
    )
    """Resume this stored session; empty means absent."""
    cwd: str | None = attrs.field(default=None, kw_only=True, validator=_check_cwd)
    """The agent's working directory (absolute); a stored session keeps its own, and an
    entry naming another fails to start it."""
    provider: str | None = attrs.field(default=None, kw_only=True, validator=_check_name)
    """The provider half of the model route."""
    model: str | None = attrs.field(default=None, kw_only=True, validator=_check_name)
    """The model name."""
    max_tokens: int | None = attrs.field(default=None, kw_only=True, validator=_check_max_tokens)
    """The per-request output limit, 1..2**53-1."""

    def __attrs_post_init__(self) -> None:
        if (clash := _identity_clash(self.session_id, self.resume_session_id)) is not None:
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
        default=DEFAULT_MAX_PARALLEL_TOOL_CALLS, validator=_check_cap
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

    id: str = attrs.field(validator=_check_exact_id)
    """The exact session id, by the stores' rule (non-empty, no path separator, ...)."""
    resume: bool = attrs.field(default=False, kw_only=True, validator=_check_flag)
    """Resume the stored session *id* instead of restoring or creating it."""


@final
@attrs.define(eq=False)
class ParallelCapSetting:
    """``max_parallel_tool_calls`` as a user-editable setting (R13.6).

    Writing an invalid value to :attr:`value` raises :class:`~retinue.ConfigError`
    and keeps the last good value; subscribers hear every accepted write.
    Nothing here blocks.
    """

    _value: int = attrs.field(
        default=DEFAULT_MAX_PARALLEL_TOOL_CALLS, alias="value", validator=_check_cap
    )
    _subscribers: list[Callable[[int], None]] = attrs.field(factory=list, init=False)

    @property
    def value(self) -> int:
        """The last good value."""
        return self._value

    @value.setter
    def value(self, value: int) -> None:
        self._value = value  # validated on set: an invalid value raises and is not stored
        for fn in list(self._subscribers):
            try:
                fn(value)
            except Exception:
                log.exception("a subscriber of max_parallel_tool_calls failed (contained)")

    def subscribe(self, fn: Callable[[int], None]) -> Callable[[], None]:
        """Call *fn* with every accepted value; returns an idempotent unsubscribe."""
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)

        return unsubscribe


def _strict(kind: type, expected: str) -> Callable[[object, object], object]:
    def structure(value: object, _type: object) -> object:
        if type(value) is not kind:
            raise _InvalidValueError("", f"expected {expected}, got {value!r}")
        return value

    return structure


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
            raise _InvalidValueError("", f"expected a table, got {value!r}")
        try:
            return generated(value, cls)
        except (cattrs.ClassValidationError, _InvalidValueError, _InvalidValuesError) as exc:
            more = _value_problems(cls, value, exc) + (across(value) if across else [])
            if not more:
                raise
            raise cattrs.ClassValidationError(
                f"While structuring {cls.__name__}", [exc, *more], cls
            ) from None

    return structure


def _failed_fields(exc: Exception) -> set[str]:
    """The fields of a table that *exc* already reports a problem for."""
    if isinstance(exc, _InvalidValueError):
        return {exc.key.split("[")[0].split(".")[0]}
    if isinstance(exc, _InvalidValuesError):
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
        except (_InvalidValueError, _InvalidValuesError) as problem:
            found.append(problem)
    return found


def _both_identities(entry: Mapping[str, object]) -> list[Exception]:
    clash = _identity_clash(entry.get("session_id"), entry.get("resume_session_id"))
    return [] if clash is None else [clash]


def _duplicate_identities(config: Mapping[str, object]) -> list[Exception]:
    """The duplicates among the entries as given, those that do not build included."""
    agents = config.get("agents")
    if not isinstance(agents, list | tuple):
        return []  # refused as a whole, already
    named = (
        _named_identity(entry.get("session_id"), entry.get("resume_session_id"))
        if isinstance(entry, Mapping)
        else ("", None)
        for entry in agents
    )
    return list(_duplicates(named))


def _array(value: object, type_: object) -> object:
    if not isinstance(value, list | tuple):
        raise _InvalidValueError("", f"expected an array of tables, got {value!r}")
    return _entries(value, type_)


_converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
_converter.register_structure_hook(int, _strict(int, "an integer"))
_converter.register_structure_hook(str, _strict(str, "a string"))
_entries = _converter.get_structure_hook(tuple[AgentEntry, ...])
_converter.register_structure_hook_func(lambda type_: type_ == tuple[AgentEntry, ...], _array)
_converter.register_structure_hook(AgentEntry, _table(AgentEntry, _both_identities))
_converter.register_structure_hook(LoopConfig, _table(LoopConfig, _duplicate_identities))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key


def _problems(exc: BaseException, path: str) -> list[str]:
    """Every problem under *exc*, each as ``"<key path>: <reason>"``."""
    if isinstance(exc, cattrs.IterableValidationError):
        indexed, unplaced = exc.group_exceptions()
        found = [p for sub, note in indexed for p in _problems(sub, f"{path}[{note.index}]")]
    elif isinstance(exc, cattrs.ClassValidationError):
        named, unplaced = exc.group_exceptions()
        found = [p for sub, note in named for p in _problems(sub, _join(path, note.name))]
    elif isinstance(exc, cattrs.ForbiddenExtraKeysError):
        keys = sorted(map(str, exc.extra_fields))
        return [f"{_join(path, key)}: unknown key" for key in keys]
    elif isinstance(exc, _InvalidValueError):
        return [f"{_join(path, exc.key) or '<top level>'}: {exc.reason}"]
    elif isinstance(exc, _InvalidValuesError):
        return [p for problem in exc.problems for p in _problems(problem, path)]
    elif isinstance(exc, KeyError):
        return [f"{path}: required key missing"]
    else:
        return [f"{path or '<top level>'}: {exc}"]
    return found + [p for sub in unplaced for p in _problems(sub, path)]


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
        problems = "; ".join(dict.fromkeys(_problems(exc, "")))
        raise ConfigError(f"invalid configuration{_where(source)}: {problems}") from exc


def load_config(path: str | os.PathLike[str]) -> LoopConfig:
    """Read a TOML file and build a :class:`LoopConfig`.

    Reads the file synchronously: call it before ``trio.run`` or through
    ``trio.to_thread.run_sync``. Raises :class:`~retinue.ConfigError` naming
    the file for an unreadable file, invalid TOML or invalid values, and
    ``TypeError`` for a *path* that is neither a ``str`` nor an
    ``os.PathLike`` (an int would be opened as a file descriptor, and closed).
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or an os.PathLike, got {type(path).__name__}")
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read configuration {os.fspath(path)}: {reason}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {os.fspath(path)}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"invalid TOML in {os.fspath(path)}: not UTF-8 text ({exc})") from exc
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
            f"expected an Identity, got {_shown(identity)}"
        )
    return _apply(entry, identity)


def _check_labels(config: LoopConfig, overrides: object) -> None:
    if not isinstance(overrides, Mapping):
        raise ConfigError(
            f"invalid identity overrides: expected a mapping of label to Identity, got "
            f"{_shown(overrides)}"
        )
    labels = Counter(entry.id for entry in config.agents)
    # Shown by repr: a key that is no string is unknown too, and must not be
    # mistaken for the label its text spells.
    unknown = sorted(_shown(label) for label in overrides if label not in labels)
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
    :class:`Identity`, or two entries left naming the same session.
    """
    _check_labels(config, overrides)
    agents = tuple(
        _overridden(index, entry, overrides) for index, entry in enumerate(config.agents)
    )
    try:
        return attrs.evolve(config, agents=agents)
    except ConfigError as exc:
        raise ConfigError(f"invalid identity overrides: {exc}") from exc
