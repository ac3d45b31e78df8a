"""The tool definition (R9.7), the context a tool may ask for, and its rich return value."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Literal, TypeAlias, cast, final

import attrs

from retinue._checks import finite_number_error
from retinue._content import ContentBlock, as_content, check_str
from retinue._handle import AgentHandle
from retinue._lossless import FrozenDict, JsonValue, freeze_json
from retinue._naming import code_name
from retinue._request import ToolSchema

from ._fit import check_fit, own_parameters, takes_any_keyword
from ._keywords import root_definition
from ._sent import as_sent
from ._validate import make_validator

__all__ = [
    "ArgumentBinder",
    "ExecutionMode",
    "ParallelSafe",
    "Tool",
    "ToolContext",
    "ToolOutput",
]

ExecutionMode: TypeAlias = Literal["parallel", "exclusive"]
"""How the scheduler may run a call (R9.8): alongside others, or alone."""

ParallelSafe: TypeAlias = bool | Callable[[JsonValue], object]
"""A declaration, or a pure classifier of the call's arguments (R9.8)."""

ArgumentBinder: TypeAlias = Callable[[Mapping[str, object]], dict[str, object]]
"""Turns validated, plain (mutable) arguments into the keyword arguments of ``fn``."""


def _freeze_parameters(value: object) -> FrozenDict:
    frozen = freeze_json(value, "parameters")
    if not isinstance(frozen, FrozenDict):
        raise TypeError("a tool's parameters must be a JSON schema object")
    defined = root_definition(frozen)
    return frozen if defined is frozen else cast("FrozenDict", freeze_json(defined, "parameters"))


# How deep a chain of partials and ``__wrapped__`` links is followed (a mock has no end).
_MAX_LAYERS = 64


def _code(fn: object) -> object:
    """The function that runs when *fn* is called: itself, or its class's ``__call__``."""
    if inspect.isroutine(fn):
        return fn
    return type(fn).__call__ if callable(fn) else None


def _callee(fn: object) -> object:
    """What calling *fn* runs: a partial returns whatever its function returns."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def layers(fn: object) -> Iterator[object]:
    """*fn*, then what it wraps: a partial's function, a ``__wrapped__`` link, in turn."""
    layer: object = fn
    for _ in range(_MAX_LAYERS):
        yield layer
        if isinstance(layer, functools.partial):
            layer = layer.func
        else:
            layer = getattr(layer, "__wrapped__", None)
            if layer is None:
                return


def _is_async(fn: Callable[..., object]) -> bool:
    """Whether calling *fn* gives a coroutine, through partials and ``__wrapped__`` links.

    A sync ``functools.wraps`` wrapper of an async function returns its coroutine:
    run in a worker thread, that coroutine could never be awaited.
    """
    return any(inspect.iscoroutinefunction(_code(layer)) for layer in layers(fn))


def _by_position(fn: Callable[..., object]) -> Callable[..., object]:
    """*fn*, or an adapter taking its positional-only parameters by keyword.

    Arguments arrive as a JSON object: such a parameter can only be named there.
    A ``functools.singledispatch`` function picks its implementation by the class
    of its first positional argument, so its first parameter is passed by position too,
    as it is to a ``functools.wraps`` wrapper of one that takes positional arguments,
    to pass on (not to one taking its arguments by name alone).
    """
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read: called as given
        return fn
    leading = tuple(
        (p.name, p.default) for p in parameters if p.kind is inspect.Parameter.POSITIONAL_ONLY
    )
    # Dispatched on, its first argument is always passed: its default too, when omitted.
    dispatched = bool(parameters) and _dispatches(fn) and _takes_position(fn)
    if dispatched and not leading:
        first = parameters[0]
        if first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            leading = ((first.name, first.default),)
    return _ByPosition(fn, leading, dispatched=dispatched) if leading else fn


def _dispatches(fn: object) -> bool:
    """Whether *fn* is a ``functools.singledispatch`` function, or a partial of one (given
    by keyword, its first argument leaves it nothing to dispatch on, and every call fails)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return isinstance(getattr(fn, "registry", None), MappingProxyType) and callable(
        getattr(fn, "dispatch", None)
    )


def _takes_position(fn: Callable[..., object]) -> bool:
    """Whether *fn*'s own parameters, not those a ``functools.wraps`` wrapper shows (and
    whose ``registry`` it copies), take an argument by position."""
    own = own_parameters(fn)
    if own is None:  # what it takes is unknown: as the dispatcher's
        return True
    return any(p.kind in _POSITIONAL for p in own.values())


def _names_own_parameter(fn: Callable[..., object], name: str) -> bool:
    """Whether *fn*'s own parameters, not those a ``functools.wraps`` wrapper shows, name
    *name* as one that can be given by name."""
    own = own_parameters(fn)
    if own is None:  # what it takes is unknown: as the dispatcher's
        return False
    parameter = own.get(name)
    return parameter is not None and parameter.kind in _BY_NAME


_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.VAR_POSITIONAL,
)


def _check_dispatched_not_bound_by_name(fn: Callable[..., object], name: str) -> None:
    """Refuse a partial giving a singledispatch function by name the argument it dispatches on.

    The function takes that argument by position alone: given by name, it leaves
    nothing to dispatch on, and the partial fails at every call, called alone too.

    Raises:
        TypeError: *fn* is such a partial.
    """
    keywords: set[str] = set()
    callee: object = fn
    while isinstance(callee, functools.partial):
        keywords.update(callee.keywords)
        callee = callee.func
    if not keywords or not _dispatches(callee):
        return
    function = cast("Callable[..., object]", callee)
    try:
        first = next(iter(inspect.signature(function).parameters.values()), None)
    except (TypeError, ValueError):  # what it takes is unknown
        return
    if (
        first is None
        or first.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD
        or first.name not in keywords
        # A wrapper taking it by name passes it on itself, by position if it must.
        or not _takes_position(function)
        or _names_own_parameter(function, first.name)
    ):
        return
    called = code_name(function)
    raise TypeError(
        f"tool {name!r}: functools.partial binds {first.name!r} by name, the argument "
        f"{called} dispatches on (functools.singledispatch), which takes it by position "
        f"alone: every call would fail; bind it by position (functools.partial({called}, "
        f"{first.name})) or leave it to the model"
    )


@final
@attrs.frozen
class _ByPosition:
    """Calls ``fn`` with its positional-only parameters, given by keyword, by position."""

    fn: Callable[..., object]
    leading: tuple[tuple[str, object], ...]
    """Each positional-only parameter's name and default (``Parameter.empty``: none)."""
    dispatched: bool = False
    """Whether the defaults of omitted ones are passed though none after them is given."""

    # self by position only: an argument of fn may be named self too.
    def __call__(self, /, **kwargs: object) -> object:
        args: list[object] = []
        waiting: list[object] = []  # defaults of omitted ones, passed only if a later one is given
        for name, default in self.leading:
            if name in kwargs:
                args += waiting
                args.append(kwargs.pop(name))
                waiting.clear()
            elif default is inspect.Parameter.empty:
                break  # missing: fn refuses the call, naming it
            else:
                waiting.append(default)
        if self.dispatched:
            args += waiting
        return self.fn(*args, **kwargs)


def _check_not_generator(fn: Callable[..., object]) -> None:
    """Refuse a (async) generator function: each call would give an iterator, not a result."""
    code = _code(_callee(fn))
    if inspect.isgeneratorfunction(code) or inspect.isasyncgenfunction(code):
        name = code_name(fn)
        raise TypeError(
            f"{name} is a generator function: a tool body returns its whole result "
            "(collect the items in a list)"
        )


# What OpenAI and Anthropic accept; a name past it fails every request that carries the tool.
_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_name(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if _PROVIDER_NAME.fullmatch(value) is None:
        raise ValueError(
            f"invalid tool name {value!r}: use 1 to 64 ASCII letters, digits, '_' or '-'"
        )


def _check_parallel_safe(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, bool) and not callable(value):
        raise TypeError("parallel_safe must be a bool or a callable classifier")


def _check_timeout(
    _instance: object, _attribute: attrs.Attribute[float | None], value: float | None
) -> None:
    if value is None:
        return
    error = finite_number_error(value)
    if error is TypeError:
        raise TypeError("timeout must be a number of seconds or None")
    if error is not None:
        raise ValueError(f"timeout must be a positive finite number of seconds, got {value!r}")


def _check_context_parameter(instance: Tool, _attribute: object, value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"context_parameter must be a str or None, got {type(value).__name__}")
    properties = instance.parameters.get("properties")
    if isinstance(properties, dict) and value in properties:
        raise ValueError(
            f"context_parameter {value!r} is also a property of parameters: the model's "
            "value for it would be replaced by the ToolContext; remove it from the schema"
        )
    if not _takes_keyword(instance.fn, value):
        name = code_name(instance.fn)
        raise ValueError(
            f"context_parameter {value!r} names no parameter of {name}: every call would "
            "fail passing it the ToolContext; name one of its parameters"
        )


def _takes_keyword(fn: Callable[..., object], name: str) -> bool:
    """Whether *fn* takes an argument *name* (a positional-only one is passed by position).

    Its own signature, not that of a function it wraps (``functools.wraps``): a wrapper
    may take the context itself. ``True`` when it takes ``**kwargs`` (a wrapper may pass
    them on or take the context out of them) or its signature cannot be read: what it
    takes is unknown.
    """
    parameters = own_parameters(fn)
    if parameters is None or takes_any_keyword(parameters):
        return True
    found = parameters.get(name)
    return found is not None and found.kind is not inspect.Parameter.VAR_POSITIONAL


@final
@attrs.frozen
class Tool:
    """A tool the model may call: its schema, its body and its scheduling declarations.

    Build one with the :func:`tool` decorator, or directly for a hand-written
    schema. Only ``name``, ``description`` and ``parameters`` reach the model.
    """

    name: str = attrs.field(validator=[check_str, _check_name])
    """Unique name within a view (scoped tools shadow global ones of that name).

    1 to 64 ASCII letters, digits, ``_`` or ``-``: the names providers accept.
    """
    description: str = attrs.field(validator=check_str)
    """What the tool does, for the model."""
    parameters: FrozenDict = attrs.field(converter=_freeze_parameters)
    """The JSON schema of the arguments object; arguments are checked against it before the body runs.

    Its root must be ``"type": "object"``, or only a ``$ref`` to one of its
    ``$defs`` that is (pydantic's schema of a recursive model): that
    definition is then the root, its ``$defs`` kept beside it. The check enforces ``type`` (a JSON
    type name or a list of them), ``enum``, ``const``, ``properties``,
    ``required``, ``additionalProperties``, ``propertyNames``,
    ``minProperties``, ``maxProperties``, ``items``, ``prefixItems``,
    ``minItems``, ``maxItems``, ``uniqueItems`` (``1`` equals ``1.0``, not
    ``true``), ``minimum``, ``maximum``, ``exclusiveMinimum``,
    ``exclusiveMaximum``, ``multipleOf``, ``minLength`` and ``maxLength`` (in
    code points), ``pattern`` (Python's ``re.search``, its ``$`` matching only
    at the end, as JSON Schema's does, inline flags or not, but under the
    multiline flag ``(?m)``, where it ends each line), ``allOf``, ``anyOf``,
    ``oneOf``, ``not`` and local ``$ref``s (``#/$defs/Name``,
    ``#/definitions/Name``, recursive ones too): what pydantic's
    ``model_json_schema()`` writes. Annotations pass through unchecked:
    ``title``, ``description``, ``default`` (not checked against the schema),
    ``examples``, ``deprecated``, ``readOnly``, ``writeOnly``, ``$comment``,
    ``$schema``, ``format``, ``contentEncoding``, ``contentMediaType``, ``contentSchema``,
    OpenAPI's ``discriminator`` and any ``x-`` extension; one of the wrong JSON type
    (``"description": null``) is left out of the schema sent, as JSON Schema's
    meta-schema refuses it. Any other keyword is refused when the tool is
    built, as are ``oneOf``, ``anyOf``, ``allOf``, ``enum``, ``const`` and
    ``not`` at the root (providers refuse a tool carrying them there), an
    unknown type name, a malformed keyword value, an invalid pattern and a
    ``$ref`` that leads nowhere or loops without descending into a value: ``ValueError`` (``TypeError`` for a keyword value of the wrong
    JSON type) naming its path, e.g. ``parameters.properties.days.minimum``.
    A constraint in the schema is enforced on every call or refused once,
    never ignored. So is a schema whose every call ``fn`` would refuse: a
    ``required`` property naming none of its parameters (unless it takes
    ``**kwargs``), a parameter of it without a default that the schema
    neither lists nor lets a call add, or a property naming a parameter a
    ``functools.partial`` gives by position, but for a positional-only one
    beside ``**kwargs``, which takes the name (``ValueError``).

    A pattern runs on the runtime's thread, with Python's backtracking ``re``
    (pydantic's own validation uses a linear-time engine): one that can match
    a text in many ways, such as ``^(a+)+$`` or ``^(\\w+\\s?)*$``, takes time
    exponential in the length of a text it refuses, and a model's argument
    of a few dozen characters then stalls every agent of the runtime. Write
    patterns that match each text one way only (an atomic group ``(?>...)``
    or a possessive ``a++`` keeps one), and give the string a ``maxLength``
    beside its ``pattern``, in the same schema: it is checked first, and the
    pattern never runs on a longer text.
    """
    fn: Callable[..., object] = attrs.field(validator=attrs.validators.is_callable())
    """The body: a sync function (run in a worker thread) or an async function.

    It is called with the arguments as keyword arguments, but for its
    positional-only parameters: those are filled by name from the arguments
    and passed by position, as is the first parameter of a
    ``functools.singledispatch`` function, which it dispatches on (and of a
    ``functools.wraps`` wrapper of one, unless the wrapper takes arguments by name
    alone). A sync wrapper of an
    async function (one that keeps ``__wrapped__``, as ``functools.wraps``
    does) counts as async, through ``functools.partial`` too. Generator
    functions are refused (``TypeError``), as is a partial giving a
    singledispatch function by name the argument it dispatches on.
    """
    parallel_safe: ParallelSafe = attrs.field(default=False, validator=_check_parallel_safe)
    """``True``, or a classifier returning exactly ``True``, allows parallel runs (R9.8)."""
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    """Seconds the body may run; past it the call ends with ``TOOL_TIMEOUT``.

    A sync body past it is abandoned, not stopped: its thread runs on until it
    returns, within the registry's bound (``ABANDONED_THREADS``).
    """
    context_parameter: str | None = attrs.field(
        default=None, kw_only=True, validator=_check_context_parameter
    )
    """The keyword that receives the :class:`ToolContext`, if the body asks for one.

    It may not also be a property of ``parameters``, whose value from the model
    would be replaced without a word, and must name a parameter of ``fn`` (or
    ``fn`` must take ``**kwargs``), which every call passes it to: else
    ``ValueError``.
    """
    bind: ArgumentBinder | None = attrs.field(default=None, kw_only=True, repr=False)
    """Converts validated arguments to ``fn``'s keyword arguments (enums, records)."""

    schema: ToolSchema = attrs.field(init=False, repr=False, eq=False)
    """The part of this tool the model sees (built once).

    Its parameters are ``parameters`` with ``"items": {}`` added to each array
    schema without ``items`` and ``"properties": {}`` to a root without
    ``properties`` (JSON Schema reads them alike, and OpenAI refuses every
    request carrying a tool that lacks either), and each annotation of the wrong
    JSON type left out (a provider checking the meta-schema refuses it).
    """

    check_arguments: Callable[[object], str | None] = attrs.field(init=False, repr=False, eq=False)
    """Validate arguments against ``parameters``: the first problem, or ``None``."""

    is_async: bool = attrs.field(init=False, repr=False, eq=False)
    """Whether ``fn`` is awaited in the calling task (else it runs in a worker thread)."""

    call: Callable[..., object] = attrs.field(init=False, repr=False, eq=False)
    """What a call runs with the arguments as keywords: ``fn``, or an adapter that
    passes ``fn``'s positional-only parameters by position."""

    def __attrs_post_init__(self) -> None:
        _check_not_generator(self.fn)
        _check_dispatched_not_bound_by_name(self.fn, self.name)
        object.__setattr__(self, "call", _by_position(self.fn))
        # Checked first: the schema sent is read only once the parameters are known sound.
        object.__setattr__(self, "check_arguments", make_validator(self.parameters))
        if self.bind is None:  # a binder maps the arguments to the body's keywords its own way
            check_fit(self.fn, self.parameters, self.context_parameter)
        sent = as_sent(self.parameters)
        object.__setattr__(self, "schema", ToolSchema(self.name, self.description, sent))
        object.__setattr__(self, "is_async", _is_async(self.fn))


@final
@attrs.frozen
class ToolContext:
    """What a tool body receives when it declares a parameter of this type.

    Only a parameter of its own (``ToolContext`` or ``ToolContext | None``)
    receives it; the model never sees or supplies one.

    A sync body runs in a worker thread, where it must not touch the agent
    directly: the agent's verbs append to its session and wake its observers
    and subscribers, which only the trio thread may do. So a sync body's
    ``agent`` is a stand-in that runs every attribute read and method call of
    the handle on the trio thread (``trio.from_thread.run_sync``), blocking the
    worker until it returns: ``ctx.agent.inject(...)``, ``send``, ``steer`` and
    ``cancel`` work as from an async body, while the call lasts (not inside a
    ``trio.run`` the body starts in its thread: ``RuntimeError``). A body abandoned
    at its timeout or a cancel runs on in its thread, but as an async body cannot
    act once cancelled, its method calls after the call has ended (answered,
    cancelled or timed out) raise ``AgentError`` coded ``CALL_ENDED`` in the
    thread and reach nothing (R2.25, R9.20), after the runtime's ``trio.run``
    too; reads (``id``, ``status``, ``session``) still answer while that run
    lasts, and are refused alike once it is over. Its async methods (``ask``, ``wait_idle``,
    ``dispose``) raise ``TypeError``: a sync body cannot await them; make the
    tool async to call them. Its ``session`` is wrapped the same way (an append
    through it runs on the trio thread), so it is not a
    ``Session`` instance; other objects it returns are the real ones.
    """

    call_id: str
    """The model's id of this call."""
    agent: AgentHandle | None = None
    """The calling agent's handle (a sync body's stand-in), or ``None`` outside an agent."""
    agent_id: str | None = None
    """The calling agent's id, or ``None`` outside an agent."""


def _freeze_meta(value: object) -> JsonValue:
    # Named, so a refusal says which value of the tool's return it is about.
    return freeze_json(value, "meta")


@final
@attrs.frozen
class ToolOutput:
    """A tool return value that carries ``meta`` next to its content.

    ``meta`` is recorded with the result but is not shown to the model.
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=as_content)
    """The result content: a str, a block or a sequence of blocks."""
    meta: JsonValue = attrs.field(default=None, converter=_freeze_meta)
    """Lossless JSON kept with the result; ``None`` when absent."""
