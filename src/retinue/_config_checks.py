"""The checks of configuration values (R13.1, R13.2) and the errors naming the key they fail.

Each check raises :class:`InvalidValueError` with the key relative to where it
was found; the configuration module prefixes the path (``agents[2].max_tokens``)
and the file. The identity checks serve both a built entry or configuration and
a table as given, whose other keys may not build: the same rule then reports
the same problem either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from retinue._errors import ConfigError
from retinue._fresh_ids import FRESH_SUFFIX_SAMPLE
from retinue._lossless import shown_short
from retinue._options import AgentOptions, cwd_problem, name_problem
from retinue._session_ids import MAX_ID_LENGTH, id_problem

__all__ = [
    "MAX_LISTED_PROBLEMS",
    "InvalidValueError",
    "InvalidValuesError",
    "both_identities",
    "check_agent_option",
    "check_cap",
    "check_cwd",
    "check_exact_id",
    "check_flag",
    "check_label",
    "check_name",
    "check_session_id",
    "duplicate_identities",
    "duplicates",
    "empty_is_none",
    "identity_clash",
    "label_problem",
    "listed_problems",
    "named_identity",
    "session_id_problem",
]

# An entry without an exact id runs as ``<label>-session-<uuid4>`` (R13.3), an id
# a store must accept: the label has to leave room for the suffix.
MAX_LABEL_LENGTH = MAX_ID_LENGTH - len(FRESH_SUFFIX_SAMPLE)


class InvalidValueError(ConfigError):
    """A problem at *key* (relative to where it was found): ``"<key>: <reason>"``."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuilt from its parts: the message alone does not give them back.
        return type(self), (self.key, self.reason), self.__dict__


class InvalidValuesError(ConfigError):
    """Several problems one check found, each an :class:`InvalidValueError`."""

    def __init__(self, problems: Iterable[InvalidValueError]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problem.message for problem in self.problems))

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.problems,), self.__dict__


def check_cap(_instance: object, _attribute: object, value: int) -> None:
    """Refuse a ``max_parallel_tool_calls`` that is not a positive integer."""
    if type(value) is not int or value < 1:
        raise InvalidValueError(
            "max_parallel_tool_calls", f"must be a positive integer, got {shown_short(value)}"
        )


def check_agent_option(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Refuse a value ``AgentOptions`` refuses for its field of this name; None passes.

    The entry gives the value to that field: checked by the same rule, so the file
    and the code refuse alike.
    """
    if value is None:
        return
    try:
        AgentOptions(**{attribute.name: value})
    except ConfigError as exc:
        raise InvalidValueError(
            attribute.name, exc.message.removeprefix(f"{attribute.name} ")
        ) from None


def session_id_problem(value: object) -> str | None:
    """Why *value* cannot be a session id (the stores' own rule, R11.12), or None."""
    if not isinstance(value, str):
        return f"must be a string, got {shown_short(value)}"
    problem = id_problem(value)
    return (
        None if problem is None else f"must be a valid session id: {shown_short(value)} {problem}"
    )


def label_problem(value: object) -> str | None:
    """Why *value* cannot be an entry's label, or None."""
    if not isinstance(value, str):
        return f"must be a string, got {shown_short(value)}"
    if not value:
        return "must be a non-empty label, got ''"
    if len(value) > MAX_LABEL_LENGTH:
        return (
            f"must be at most {MAX_LABEL_LENGTH} characters, got {len(value)}: a fresh session "
            f"id '<label>-session-<uuid4>' must fit in {MAX_ID_LENGTH}"
        )
    problem = id_problem(value + FRESH_SUFFIX_SAMPLE)
    return None if problem is None else f"must be a valid label: {shown_short(value)} {problem}"


def check_label(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    """Refuse a label :func:`label_problem` finds a problem with."""
    # Typed as object: a value built in Python (not read from TOML) may be anything.
    if (problem := label_problem(value)) is not None:
        raise InvalidValueError(attribute.name, problem)


def check_session_id(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    """Refuse an optional session id that is not a valid one; None passes."""
    if value is not None and (problem := session_id_problem(value)) is not None:
        raise InvalidValueError(attribute.name, problem)


def check_exact_id(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    """Refuse a required session id that is not a valid one."""
    # Unlike an entry's optional ids, an override's id is required: empty or
    # missing would read as "no identity" and quietly clear the entry's.
    if (problem := session_id_problem(value)) is not None:
        raise InvalidValueError(attribute.name, problem)


def check_flag(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    """Refuse a flag that is not a ``bool``."""
    if type(value) is not bool:
        raise InvalidValueError(attribute.name, f"must be a boolean, got {shown_short(value)}")


def check_cwd(_instance: object, _attribute: object, value: str | None) -> None:
    """Refuse a ``cwd`` that cannot be a working directory; None passes."""
    if value is not None and (problem := cwd_problem(value)) is not None:
        raise InvalidValueError("cwd", problem)


def check_name(_instance: object, attribute: attrs.Attribute[str], value: str | None) -> None:
    """Refuse a provider or model name that a request could not carry; None passes."""
    if value is not None and (problem := name_problem(value)) is not None:
        raise InvalidValueError(attribute.name, problem)


def empty_is_none(value: str | None) -> str | None:
    """*value*, with an empty string read as absent."""
    return None if value == "" else value


def identity_clash(session_id: object, resume_session_id: object) -> InvalidValueError | None:
    """The problem of an entry naming both identities (R13.2); an empty resume id is absent."""
    if session_id is None or resume_session_id in (None, ""):
        return None
    return InvalidValueError("resume_session_id", "cannot be combined with session_id")


def named_identity(session_id: object, resume_session_id: object) -> tuple[str, object]:
    """The key an entry names its session by, and what it gives there (None or "" for none)."""
    if session_id is not None:
        return "session_id", session_id
    return "resume_session_id", resume_session_id


def duplicates(named: Iterable[tuple[str, object]]) -> list[InvalidValueError]:
    """One problem per entry naming a session an earlier entry names (R13.2).

    *named* holds each entry's :func:`named_identity`, in order; an id that
    is not a string is left to its own problem.
    """
    first: dict[str, int] = {}
    found: list[InvalidValueError] = []
    for index, (key, identity) in enumerate(named):
        if not isinstance(identity, str) or not identity:
            continue
        if identity in first:
            reason = f"session {identity!r} is already named by agents[{first[identity]}]"
            found.append(InvalidValueError(f"agents[{index}].{key}", reason))
        else:
            first[identity] = index
    return found


def both_identities(entry: Mapping[str, object]) -> list[Exception]:
    """The problem of an entry table as given naming both identities, if it does."""
    clash = identity_clash(entry.get("session_id"), entry.get("resume_session_id"))
    return [] if clash is None else [clash]


def duplicate_identities(config: Mapping[str, object]) -> list[Exception]:
    """The duplicates among the entries as given, those that do not build included."""
    agents = config.get("agents")
    if not isinstance(agents, list | tuple):
        return []  # refused as a whole, already
    named = (
        named_identity(entry.get("session_id"), entry.get("resume_session_id"))
        if isinstance(entry, Mapping)
        else ("", None)
        for entry in agents
    )
    return list(duplicates(named))


MAX_LISTED_PROBLEMS = 50
"""The problems a ConfigError lists: a file of thousands of bad entries would otherwise
give a message of megabytes, to a terminal or a log line."""


def listed_problems(problems: list[str]) -> str:
    """*problems* joined for a message: the first :data:`MAX_LISTED_PROBLEMS`, and a count
    of the rest."""
    shown = "; ".join(problems[:MAX_LISTED_PROBLEMS])
    rest = len(problems) - MAX_LISTED_PROBLEMS
    if rest <= 0:
        return shown
    return f"{shown}; and {rest} more problem{'' if rest == 1 else 's'}"
