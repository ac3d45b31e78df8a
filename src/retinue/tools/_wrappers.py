"""``functools.wraps`` wrappers as tools: what they show, and whether they take it."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable

from ._record_init import BY_NAME, EMPTY

__all__ = ["check_takes_what_it_shows", "shown_by"]


def shown_by(target: object) -> object:
    """What ``inspect.signature`` reads *target*'s parameters from, so its hints are read
    there too: through ``__wrapped__`` links, as ``functools.update_wrapper`` leaves on a
    callable object (whose own ``__call__`` takes ``*args, **kwargs``), up to one with a
    ``__signature__`` or a bound method."""
    if inspect.isroutine(target) or not hasattr(target, "__wrapped__"):
        return target  # a function's copied hints and docstring are its wrapped one's
    try:
        return inspect.unwrap(
            typing.cast("Callable[..., object]", target),
            stop=lambda layer: hasattr(layer, "__signature__") or inspect.ismethod(layer),
        )
    except ValueError:  # a chain that loops: read as given
        return target


def check_takes_what_it_shows(
    fn: Callable[..., object], shown: inspect.Signature, context: str | None, where: str
) -> None:
    """Refuse a wrapper whose own parameters cannot take what every call passes it.

    ``functools.wraps`` shows the wrapped function's signature, which the schema
    is read from, and copies its annotations over the wrapper's own: a parameter
    the wrapper adds (``ctx`` for itself) is neither shown nor annotated any more,
    so no call passes it, and each would fail.

    Raises:
        TypeError: a required argument of the schema, passed as every call passes
            it, does not bind to the wrapper's own signature.
    """
    try:
        own = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):  # what it takes is unknown
        return
    if own == shown:
        return
    needed = [p for p in shown.parameters.values() if p.default is EMPTY]
    leading = [None for p in needed if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    named = {p.name: None for p in needed if p.kind in BY_NAME}
    if context is not None:
        named[context] = None
    try:
        own.bind(*leading, **named)
    except TypeError as exc:
        raise TypeError(
            f"{where}: its wrapper takes {_parameters(own)}, but shows {_parameters(shown)} "
            "(functools.wraps), the signature the schema is read from, so every call "
            f"would fail: {exc}; set the wrapper's __signature__ to what it takes (a "
            "ToolContext parameter in it is injected), or give what it adds a default"
        ) from None


def _parameters(signature: inspect.Signature) -> inspect.Signature:
    return signature.replace(return_annotation=inspect.Signature.empty)
