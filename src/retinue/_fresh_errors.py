"""A fresh copy of an error raised again (a script's replay, a turn's result), so that raises
never share one error or grow its traceback."""

from __future__ import annotations

import copy
from types import FunctionType, MemberDescriptorType

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
    ``__new__`` and the nearest built-in ``__init__`` with the args, then the
    instance attributes and the fields a class keeps outside them: its slots, and
    those of a built-in base its args may not give (``OSError.filename``,
    ``ImportError.name``). An error
    whose ``__init__`` is built in is copied as pickle would copy it, then given
    those fields too.
    """
    kind = type(error)
    inits = [vars(base)["__init__"] for base in kind.__mro__ if "__init__" in vars(base)]
    if not isinstance(inits[0], FunctionType):
        # Pickle's way: it loses the fields no arg gives (AttributeError.name).
        fresh = copy.copy(error)
    else:
        builtin_init = next(init for init in inits if not isinstance(init, FunctionType))
        fresh = kind.__new__(kind, *error.args)
        builtin_init(fresh, *error.args)
        fresh.__dict__.update(error.__dict__)
    _copy_fields(error, fresh)
    return fresh


def _copy_fields(error: BaseException, fresh: BaseException) -> None:
    """Give *fresh* the fields of *error* that it lacks; a read-only one is left as built."""
    for name in _field_names(type(error)):
        # Only what differs: setting OSError.filename2 to None would add "-> None" to its str.
        if hasattr(error, name) and getattr(fresh, name, _UNSET) is not getattr(error, name):
            try:
                setattr(fresh, name, getattr(error, name))
            except AttributeError:
                if not hasattr(fresh, name):
                    raise  # a frozen class's field: no copy can be made
                # Read-only, and built from the args already (an exception group's
                # exceptions, a tuple of the list it was given).


_UNSET = object()


def _field_names(kind: type) -> list[str]:
    """The fields *kind*'s classes keep outside the instance ``__dict__``: the slots of its
    own classes and the members of its built-in bases, each a member descriptor.

    The weak-reference slot (an attrs class has one) and ``__dict__`` are no
    fields: neither is a member descriptor.
    """
    return [
        name
        for base in kind.__mro__
        for name, value in vars(base).items()
        if isinstance(value, MemberDescriptorType)
    ]
