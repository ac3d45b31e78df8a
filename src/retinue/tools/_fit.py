"""Whether a hand-written tool's schema fits its body: each call must be one it can take."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping

from retinue._naming import code_name

__all__ = ["check_fit", "own_parameters", "takes_any_keyword"]

_FILLED_BY_POSITION = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
# A positional-only parameter is filled by name from the arguments, then passed by position.
_NAMED_IN_ARGUMENTS = (*_FILLED_BY_POSITION, inspect.Parameter.KEYWORD_ONLY)


def own_parameters(fn: object) -> Mapping[str, inspect.Parameter] | None:
    """*fn*'s own parameters, not those a ``functools.wraps`` wrapper shows (a wrapper may
    take other names and pass them on as it likes); ``None`` when they cannot be read."""
    try:
        return inspect.signature(fn, follow_wrapped=False).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def takes_any_keyword(parameters: Mapping[str, inspect.Parameter]) -> bool:
    """Whether *parameters* hold a ``**kwargs``."""
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def check_fit(
    fn: Callable[..., object], parameters: Mapping[str, object], context_parameter: str | None
) -> None:
    """Refuse *parameters* (a checked schema) when *fn* would refuse every call they allow.

    *fn*'s own signature is read, not that of a function it wraps: a wrapper may take
    other names and pass them on as it likes. One that cannot be read, or takes
    ``**kwargs`` (for names the schema requires), says nothing.

    Raises:
        ValueError: a required property names no parameter of *fn*, a parameter of
            *fn* without a default is one the schema never lets a call give, or a
            property names a parameter a ``functools.partial`` of *fn* gives by position
            (but for a positional-only one beside ``**kwargs``, which then takes the name).
    """
    own = own_parameters(fn)
    if own is None:
        return
    named = {name: p for name, p in own.items() if p.kind in _NAMED_IN_ARGUMENTS}
    open_ended = takes_any_keyword(own)
    _check_not_given_twice(fn, parameters)
    required = parameters.get("required")
    for index, name in enumerate(required if isinstance(required, list | tuple) else ()):
        if name not in named and not open_ended:
            raise ValueError(
                f'parameters.required[{index}]: "{name}" names no parameter of {code_name(fn)}: '
                "every call passes it by name and would fail; name a parameter of the body, "
                "or let it take **kwargs"
            )
    if parameters.get("additionalProperties") is not False:
        return  # the model may give any other name as well
    properties = parameters.get("properties")
    listed = properties if isinstance(properties, Mapping) else {}
    for name, parameter in named.items():
        given = name in listed or name == context_parameter
        if parameter.default is inspect.Parameter.empty and not given:
            raise ValueError(
                f"parameters: {code_name(fn)} requires {name!r}, which the schema neither "
                "lists as a property nor lets the model add: every call would fail; add "
                "it to the properties, or give it a default"
            )


def _check_not_given_twice(fn: Callable[..., object], parameters: Mapping[str, object]) -> None:
    """Refuse a property naming a parameter a partial of *fn* gives by position: a call
    giving it passes it again, by name, and fails."""
    filled = _filled_by_position(fn)
    properties = parameters.get("properties")
    for name in properties if isinstance(properties, Mapping) else ():
        if name in filled:
            raise ValueError(
                f'parameters.properties.{name}: "{name}" is given by position by a '
                f"functools.partial of {code_name(fn)}, and a call giving it too would fail; "
                "rename the property, or leave the partial without it"
            )


def _filled_by_position(fn: object) -> set[str]:
    """The parameters a partial (or partials of partials) of *fn* fills by position."""
    filled: set[str] = set()
    while isinstance(fn, functools.partial):
        inner = own_parameters(fn.func)
        if inner is None:
            break
        open_ended = takes_any_keyword(inner)
        positional = [p for p in inner.values() if p.kind in _FILLED_BY_POSITION]
        # A positional-only one filled so leaves its name to **kwargs, which takes it.
        filled.update(
            p.name
            for p in positional[: len(fn.args)]
            if not (open_ended and p.kind is inspect.Parameter.POSITIONAL_ONLY)
        )
        fn = fn.func
    return filled
