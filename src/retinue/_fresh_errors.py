"""A fresh copy of an error raised again (a script's replay, a turn's result), so that raises
never share one error or grow its traceback."""

from __future__ import annotations

import copy
from types import FunctionType

__all__ = ["copied_error", "fresh_error"]


def fresh_error(error: BaseException) -> BaseException:
    """*error* itself if it was never raised, else a fresh copy to raise.

    The copy (see :func:`_copy_of`) keeps the type, args, attributes, notes
    and cause, but not the traceback, so replays never grow one traceback or
    share one error. Only an error whose type cannot be created again from
    its args (its ``__new__`` refuses them) is raised again as itself,
    without its old traceback.
    """
    if error.__traceback__ is None:
        return error
    fresh = copied_error(error)
    if fresh is None:
        return error.with_traceback(None)
    fresh.__cause__ = error.__cause__
    fresh.__suppress_context__ = error.__suppress_context__
    return fresh


def copied_error(error: BaseException) -> BaseException | None:
    """A copy of *error* (see :func:`_copy_of`) with its notes, no traceback, cause or
    context; ``None`` if its type cannot be created again from its args."""
    try:
        fresh = _copy_of(error)
        if hasattr(error, "__notes__"):
            fresh.__notes__ = list(error.__notes__)
    except Exception:
        return None
    return fresh


def _copy_of(error: BaseException) -> BaseException:
    """Copy *error* (type, args and attributes) without running an ``__init__`` written in Python.

    Such an ``__init__`` may want more than the args (SDK errors take a
    response by keyword) or rewrite them, so the copy is built from parts:
    ``__new__`` and the nearest built-in ``__init__`` with the args (this
    stores fields such as ``errno``), then the instance attributes, slots included. An error
    whose ``__init__`` is built in is copied as pickle would copy it, which
    also keeps the fields its args lack (``OSError.filename``).
    """
    kind = type(error)
    inits = [vars(base)["__init__"] for base in kind.__mro__ if "__init__" in vars(base)]
    if not isinstance(inits[0], FunctionType):
        return copy.copy(error)
    builtin_init = next(init for init in inits if not isinstance(init, FunctionType))
    fresh = kind.__new__(kind, *error.args)
    builtin_init(fresh, *error.args)
    fresh.__dict__.update(error.__dict__)
    for name in _slot_names(kind):
        if hasattr(error, name):
            setattr(fresh, name, getattr(error, name))
    return fresh


def _slot_names(kind: type) -> list[str]:
    """The attributes *kind*'s classes keep in ``__slots__``, outside the instance ``__dict__``."""
    names: list[str] = []
    for base in kind.__mro__:
        slots = vars(base).get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    # Not fields: the instance dict is copied apart, and the weak-reference slot (an attrs
    # class has one) cannot be written.
    return [name for name in names if name not in ("__dict__", "__weakref__")]
