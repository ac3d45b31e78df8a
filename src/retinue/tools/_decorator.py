"""The ``@tool`` decorator: a :class:`Tool` from a function's signature and docstring."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import overload

from retinue._lossless import shown_short

from ._hints import resolving_in
from ._schema import describe
from ._tool import ParallelSafe, Tool

__all__ = ["tool"]


@overload
def tool(fn: Callable[..., object], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: ParallelSafe = False,
    timeout: float | None = None,
) -> Callable[[Callable[..., object]], Tool]: ...
def tool(
    fn: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: ParallelSafe = False,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Turn a sync or async function into a :class:`Tool`; use bare or with options.

    The parameters' type hints become the JSON schema (``str``, ``int``,
    ``float``, ``bool``, ``None``, ``list[X]`` (``Sequence[X]``, ``Iterable[X]``,
    ``Collection[X]`` and ``MutableSequence[X]`` alike), ``tuple[X, ...]``,
    ``set[X]`` and ``frozenset[X]`` (an array with ``uniqueItems``; ``X``
    hashable, a frozen record's fields too unless it writes its ``__hash__``), ``dict[K, X]``
    (``Mapping`` and ``MutableMapping`` alike; ``K`` a hint of strings alone: ``str``, a
    ``Literal`` or an enum of them, ``str`` with a pattern or a length, each key checked
    and converted), ``Literal[...]``,
    enums (a ``Flag`` as the integer of any combination of its members),
    ``X | None``, unions,
    ``TypedDict``, attrs classes (a field with an annotated converter as what
    the converter takes), dataclasses and ``NamedTuple`` classes (an object of
    their fields, as a dataclass, not an array), generic ones given their type
    arguments (``Page[str]``), a ``NewType`` as its
    supertype, a ``type X = ...`` alias as its value (a hint may name a type
    defined in the function the tool is made in, under ``from __future__ import
    annotations`` too); ``Annotated[X, "text"]``
    adds a description, and pydantic's
    ``Field(ge=..., max_length=..., pattern=..., description=...)`` or
    annotated-types' ``Gt``, ``Le``, ``MinLen``, ... inside ``Annotated`` add
    bounds, lengths and a pattern the arguments are checked against, the
    pattern with Python's backtracking ``re``, not pydantic's linear-time
    engine: see :attr:`Tool.parameters` before writing one); parameters with
    defaults are optional, and one (or a record's field) defaulting to
    ``None`` also accepts null. Parameter names must be
    1 to 64 ASCII letters, digits, ``_``, ``.`` or ``-``, the property names
    providers accept (record keys are not held to it: providers check only
    the top level's). An ``int`` takes an integral JSON number written
    ``3.0`` too, but only below 2**53 in magnitude: past it, such a number
    arrives as a float that no longer says which integer was written, and
    the call is refused. The
    docstring's text before its first section is the description, and its
    ``Args:`` section (or NumPy's ``Parameters``, or Sphinx's
    ``:param name:`` fields) describes the parameters; a line that opens
    with a role, such as ``:class:`Forecast` caches``, is text. A parameter
    annotated :class:`ToolContext` is injected, not shown to the model.
    Every parameter is filled by name from the arguments object: a
    positional-only one is passed by position (as is the first parameter of a
    ``functools.singledispatch`` function, which it dispatches on, and of a wrapper of one
    that takes positional arguments), ``**kwargs: X`` takes the
    properties that name no other parameter (``additionalProperties`` of
    ``X``'s schema), ``**kwargs: Unpack[TD]`` takes the TypedDict's keys as
    properties of their own, and ``*args`` is refused.
    Keywords a ``functools.partial`` binds are neither shown nor accepted. A
    method becomes a tool bound to its instance (``tool(instance.method)``);
    decorated in its class body, its ``self`` would be an argument the model
    supplies, so that is refused (static methods are plain functions), as is
    ``@tool`` above ``@classmethod``: a class method is a tool bound to its
    class, ``tool(TheClass.method)`` after the class body. Sync
    functions run in a worker thread; a sync ``functools.wraps`` wrapper of
    an async function counts as async. Such a wrapper shows the signature of
    the function it wraps, which the schema is read from (``functools.wraps``
    copies that function's annotations over its own): a wrapper whose own
    parameters could not take a call, such as a required ``ctx`` it adds, is
    refused; its ``__signature__`` set to what it takes shows them.

    Args:
        fn: the function, when used bare (``@tool``).
        name: the tool name; defaults to the function's name.
        description: overrides the docstring description.
        parallel_safe: ``True``, or a pure classifier of the arguments that
            returns ``True`` when a call may run alongside others (R9.8).
        timeout: seconds the body may run before the call fails with
            ``TOOL_TIMEOUT``. A sync body cannot be stopped: its thread runs
            on until it returns, and a registry lets such abandoned bodies
            keep at most ``ABANDONED_THREADS`` (40) threads beyond the 40
            that run at once; past that, sync calls fail with
            ``TOOL_THREADS_EXHAUSTED`` until some return.

    Raises:
        TypeError: ``*args``, or a type hint the schema cannot express
            (``ToolContext`` inside another type, a set of unhashable items, one nested
            deeper than Python's stack holds, a record holding itself in a required
            field at every level, which no finite value fits, as a required parameter;
            a pydantic model, whose own schema the refusal says to build a ``Tool`` from),
            a method not bound to its instance or a class method not bound to its
            class, a generator function, a callable without a signature to read (``dict``), a
            ``functools.partial`` giving a singledispatch function by name the argument
            it dispatches on, a ``functools.wraps`` wrapper whose own parameters cannot
            take the required ones it shows, a record whose constructor does not take its
            fields by name (an ``InitVar``, an ``__init__`` of its own), what is
            already a :class:`Tool`, or a *name* that is no str.
        ValueError: a parameter name providers refuse as a property name, a
            tool name they refuse, or bounds that leave a parameter (or a part
            of one) no value of the type they bound (``Annotated[int, Ge(5),
            Le(3)]``, a ``Literal`` no value of which meets its ``MinLen``).
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"tool name must be a str, got {shown_short(name)}")
    # The scope the decorator is used in: a hint of a function defined there may
    # name a type defined there too.
    caller = sys._getframe(1)
    scope, made_in = caller.f_locals, f"{caller.f_code.co_qualname}.<locals>."
    del caller

    def build(target: Callable[..., object]) -> Tool:
        # Only for a function made in that scope: through a helper that calls tool(),
        # the helper's own names are not the function's.
        own = str(getattr(target, "__qualname__", "")).startswith(made_in)
        with resolving_in(scope if own else None):
            spec = describe(target)
        tool_name = name if name is not None else getattr(target, "__name__", None)
        if not isinstance(tool_name, str):
            raise TypeError(f"{target!r} has no __name__; pass name=")
        return Tool(
            tool_name,
            spec.description if description is None else description,
            spec.parameters,
            target,
            parallel_safe,
            timeout,
            context_parameter=spec.context_parameter,
            bind=spec.bind,
        )

    if fn is None:
        return build
    return build(fn)
