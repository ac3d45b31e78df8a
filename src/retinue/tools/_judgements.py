"""One argument check's state: the judgements it has made, and how deep its attempt is.

See :mod:`._validate`: a container nested past :data:`ATTEMPT_DEPTH` below the
start of an attempt is set aside (:class:`TooDeep`) and judged by an attempt of
its own; every judgement kept is read, not made again.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ATTEMPT_DEPTH", "Run", "TooDeep", "set_aside"]


class Run:
    """One check's state: the root ``$ref``s resolve in, and the judgements already made."""

    __slots__ = ("by_path", "depth", "known", "rests", "root")

    def __init__(self, root: Mapping[str, object], *, by_path: bool = True) -> None:
        self.root = root
        # (id(value), id(schema), path) -> (problem, value, schema). The entry holds the
        # value and the schema so that neither id is freed and reused while the check runs.
        self.known: dict[tuple[int, int, str], tuple[str | None, object, object]] = {}
        # False: a judgement is read wherever its value is met again, its problem's path
        # that of the first place. Only whether a value conforms is asked of such a run.
        self.by_path = by_path
        self.depth = 0  # containers entered below the attempt that is running
        # Made when first needed: most checks refuse nothing, or by no choice set.
        self.rests: dict[int, tuple[Mapping[str, object], Mapping[str, object]]] | None = None

    def without_choices(self, member: Mapping[str, object]) -> Mapping[str, object]:
        """*member* but its ``enum`` and ``const``: one schema each time, so one id to judge by."""
        if self.rests is None:
            self.rests = {}
        kept = self.rests.get(id(member))
        if kept is None:
            rest = {k: v for k, v in member.items() if k not in ("enum", "const")}
            kept = self.rests[id(member)] = (member, rest)
        return kept[1]

    def key(self, value: object, schema: object, path: str) -> tuple[int, int, str]:
        """Where the judgement of *value* against *schema* at *path* is kept."""
        return (id(value), id(schema), path if self.by_path else "")


class TooDeep(Exception):  # noqa: N818 - a signal within a check, never raised out of it
    """A container nested too deeply for one attempt: checked on its own first."""

    def __init__(self, value: object, schema: object, path: str) -> None:
        super().__init__(path)
        self.value, self.schema, self.path = value, schema, path


# Containers one attempt enters before the one below is set aside (TooDeep). A level
# costs a few frames (more under allOf, anyOf and $ref): this many stay far inside
# Python's recursion limit, whatever the depth of the arguments and of the caller.
ATTEMPT_DEPTH = 24


def set_aside(value: object, schema: object, path: str, run: Run) -> str | None:
    """The judgement of a container too deep for this attempt: read if made, else asked for."""
    seen = run.known.get(run.key(value, schema, path))
    if seen is None:
        raise TooDeep(value, schema, path)
    return seen[0]
