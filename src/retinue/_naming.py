"""How errors name user code: by where it is written, never by an object's repr."""

from __future__ import annotations

import functools

from retinue._errors import synchronous_failure

__all__ = ["code_name", "qualified_name"]


def qualified_name(fn: object) -> str:
    """*fn*'s module and qualified name (``app.Policy.check``), as a user finds it in the code.

    A partial is named by what it calls, an object by its class's ``__call__``.
    A repr would show a partial's arguments or a bound method's object, which may
    hold a credential, and errors are logged and stored.
    """
    while isinstance(fn, functools.partial):
        fn = fn.func
    try:
        qualname, module = getattr(fn, "__qualname__", None), getattr(fn, "__module__", None)
    except BaseException as exc:
        # An attribute that raises (a SystemExit too, but Ctrl-C) must not take the place
        # of the error that names fn.
        if not synchronous_failure(exc):
            raise
        qualname = module = None
    if not isinstance(qualname, str):
        qualname, module = f"{type(fn).__qualname__}.__call__", type(fn).__module__
    return f"{module}.{qualname}" if isinstance(module, str) else qualname


def code_name(fn: object) -> str:
    """*fn*'s ``__qualname__`` (``Policy.check``), else :func:`qualified_name`'s: a partial
    by what it calls, an object by its class's ``__call__``; never its repr."""
    try:
        qualname = getattr(fn, "__qualname__", None)
    except BaseException as exc:
        if not synchronous_failure(exc):
            raise
        qualname = None
    return qualname if isinstance(qualname, str) and qualname else qualified_name(fn)
