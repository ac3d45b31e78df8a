"""The checks of ``open_runtime``'s arguments: a mistake is a ConfigError naming the argument.

Refused up front rather than when first used: a tool order given as one string
would otherwise fail every turn naming its letters, and a store, model or policy
of the wrong kind fails only at the first step, crash or exit that reaches it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from retinue._callables import is_async, is_generator
from retinue._checks import collection_error, finite_number_error, needs_an_instance
from retinue._errors import ConfigError, ModelError
from retinue._lossless import shown_short
from retinue.config import LoopConfig
from retinue.loop import DEFAULT_MAX_PARALLEL_TOOL_CALLS, check_parallel_cap
from retinue.prompt import is_variable_name
from retinue.providers import AdmissionController, Model, ModelRouter, RetryPolicy
from retinue.providers._model import is_adapter
from retinue.tools import Tool

from ._supervise import RestartPolicy

__all__ = [
    "check_kinds",
    "check_store",
    "flush_timeout_of",
    "models_of",
    "parallel_cap_of",
    "passes_on",
    "tool_order_of",
    "tools_of",
    "variables_of",
]

# The arguments whose value, when given, is one object of a known kind.
_KINDS: dict[str, type] = {
    "restart": RestartPolicy,
    "retry": RetryPolicy,
    "admission": AdmissionController,
    "config": LoopConfig,
}


def check_store(store: object) -> None:
    """Refuse a *store* that is no session store, or one the runtime could not close.

    Read by its shape, not as an instance of :class:`SessionStore`: a store
    written before the protocol had ``durable`` is still served. The refusal
    names what is missing or of the wrong kind, and the store lacking it when a
    wrapper passes the call on to the store it wraps (see :func:`passes_on`).
    """
    if store is None:
        return
    refused = f"store must be None or a session store, got {shown_short(store)}"
    served = {op: _serving(store, op) for op in _STORE_OPS}
    owners = {op: owner for op, owner in served.items() if owner is not _CIRCLE}
    if len(owners) < len(served):
        raise ConfigError(f"{refused}: it wraps itself, a call passed on would come back to it")
    if not any(callable(getattr(owner, op, None)) for op, owner in owners.items()):
        inner = owners["flush"]
        if inner is store:
            raise ConfigError(refused)  # no store at all: no one thing it lacks
        raise ConfigError(f"{refused}: {_wrapped(store, inner)}no session store")
    problem = _store_problem(store, owners)
    if problem is not None:
        raise ConfigError(f"{refused}: {problem}")


_STORE_OPS = ("attach", "attach_new", "flush", "detach", "load", "exists")
# Called without await, as the session's sync observers: an async def would
# return a coroutine never awaited, and the session would never be stored.
_SYNC_STORE_OPS = ("attach", "attach_new")
_PASSES_ON = "_retinue_passes_on"
_Method = TypeVar("_Method", bound=Callable[..., object])


def passes_on(method: _Method) -> _Method:
    """Mark *method* of a store wrapper as passing each call on to the store it wraps, its
    ``store`` attribute: the store check reads that store's method in its stead, which a
    subclass overriding *method* stops."""
    setattr(method, _PASSES_ON, True)
    return method


_UNSET = object()
"""A wrapper with no ``store`` attribute (``None`` is a store given, and refused as one)."""
_CIRCLE = object()
"""What :func:`_serving` finds when a call would come back to a wrapper it passed."""


def _serving(store: object, name: str) -> object:
    """The store whose *name* a call of *store*'s reaches, through every wrapper passing it
    on; :data:`_CIRCLE` when the call would come back to a wrapper it passed."""
    seen = [store]
    while getattr(inspect.getattr_static(type(store), name, None), _PASSES_ON, False):
        inner = getattr(store, "store", _UNSET)
        if inner is _UNSET:
            break  # wraps nothing yet: the wrapper's own method is what there is
        if any(inner is one for one in seen):
            return _CIRCLE
        seen.append(inner)
        store = inner
    return store


def _wrapped(store: object, owner: object) -> str:
    """Where the problem lies when *store* passes the call on to *owner*."""
    return "" if owner is store else f"the store it wraps, {shown_short(owner)}: "


def _store_problem(store: object, owners: Mapping[str, object]) -> str | None:
    """What keeps *store*, which has some of a store's methods (each of *owners*', the store
    a call of it reaches), from serving as one, or None."""
    if needs_an_instance(store, *_STORE_OPS):
        return "a store class, where an instance of it belongs"
    missing = [op for op, owner in owners.items() if not callable(getattr(owner, op, None))]
    if missing:
        owner = owners[missing[0]]
        missing = [op for op in missing if owners[op] is owner]
        return f"{_wrapped(store, owner)}no method {', '.join(missing)}"
    for op in _SYNC_STORE_OPS:
        method = getattr(owners[op], op)
        if is_async(method) or is_generator(method):
            kind = "async" if is_async(method) else "a generator function"
            return f"{_wrapped(store, owners[op])}{op} is {kind}, and the runtime calls it once, without await"
    closer = _serving(store, "__aexit__")
    if closer is _CIRCLE:
        return "it wraps itself, and closing it would come back to it"
    if not _closable(closer):
        return f"{_wrapped(store, closer)}no aclose() and no __aenter__/__aexit__ to close it with"
    return None


def _closable(store: object) -> bool:
    """Whether the runtime can close *store* as it does: with ``async with`` when its
    class is an async context manager (where ``async with`` looks), else by ``aclose()``.

    Checked up front: the close comes after every agent has run.
    """
    kind = type(store)
    if hasattr(kind, "__aenter__"):
        return hasattr(kind, "__aexit__")
    return callable(getattr(store, "aclose", None))


def check_kinds(**arguments: object) -> None:
    """Refuse any of *arguments* (by name) that is neither None nor of its kind."""
    for name, value in arguments.items():
        kind = _KINDS[name]
        if value is not None and not isinstance(value, kind):
            raise ConfigError(
                f"{name} must be None or of type {kind.__name__}, got {shown_short(value)}"
            )


def models_of(models: Model | Mapping[str, Model]) -> Model:
    """The model every agent calls: *models* itself, or a router over a mapping of them."""
    if not isinstance(models, Mapping):
        if not is_adapter(models):
            raise ConfigError(
                f"models must be a Model or a mapping of model names to Models, got {shown_short(models)}"
            )
        return models
    try:
        return ModelRouter.of(models)
    except ModelError as exc:
        raise ConfigError(f"models: {exc.message}") from exc
    except TypeError as exc:  # a route the router refuses, named by its key
        raise ConfigError(f"models: {exc}") from exc


def tools_of(tools: object) -> tuple[Tool, ...]:
    """*tools*, a collection of :class:`Tool` of distinct names (the runtime's, or one
    agent's own), as a tuple."""
    if collection_error(tools) is not None or not isinstance(tools, Iterable):
        raise ConfigError(f"tools must be a collection of Tools, got {shown_short(tools)}")
    listed: dict[str, Tool] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, Tool):
            raise ConfigError(f"tools[{index}] must be a Tool, got {shown_short(item)}")
        if item.name in listed:
            raise ConfigError(f'tools[{index}]: tool "{item.name}" is given twice')
        listed[item.name] = item
    return tuple(listed.values())


def variables_of(variables: Mapping[str, str | None] | None) -> dict[str, str | None]:
    """The prompt variables: names to text, or to None for one without a value (R7.52)."""
    if variables is None:
        return {}
    if not isinstance(variables, Mapping):
        raise ConfigError(
            f"variables must be a mapping of variable names to text, got {shown_short(variables)}"
        )
    for name, value in variables.items():
        if not isinstance(name, str):
            raise ConfigError(f"variables: a name must be a string, got {shown_short(name)}")
        if not is_variable_name(name):
            # No template could ever use it: {{user name}} is a syntax error.
            raise ConfigError(
                f"variables: {shown_short(name)} is not a variable name a template can use: a letter "
                "or _, then letters, digits, _, . or -"
            )
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                f"variables[{shown_short(name)}] must be a string or None, got {shown_short(value)}"
            )
    return dict(variables)


def tool_order_of(order: Iterable[str] | None) -> tuple[str, ...] | None:
    """The configured tool order (R7.51): tool names and at most one ``"*"``, none twice.

    A name no tool has yet is not refused here: its tool may be registered later.
    """
    if order is None:
        return None
    # A set is a collection too, but in no order the caller chose.
    if collection_error(order) is not None or isinstance(order, set | frozenset):
        raise ConfigError(f"tool_order must be a sequence of tool names, got {shown_short(order)}")
    names = tuple(order)
    seen: set[str] = set()
    for index, name in enumerate(names):
        if not isinstance(name, str):
            raise ConfigError(f"tool_order[{index}] must be a tool name, got {shown_short(name)}")
        if name in seen:
            raise ConfigError(f'tool_order lists "{name}" twice')
        seen.add(name)
    return names


def parallel_cap_of(cap: int | None, config: LoopConfig | None) -> int:
    """The tool-call cap: *cap*, else *config*'s, else the default (R9.11, R13.1).

    A cap given beside a *config* with another cap is refused: one of the two
    would be dropped unseen.
    """
    if cap is None:
        return DEFAULT_MAX_PARALLEL_TOOL_CALLS if config is None else config.max_parallel_tool_calls
    check_parallel_cap(cap)
    if config is not None and cap != config.max_parallel_tool_calls:
        configured = config.max_parallel_tool_calls
        # A config holds the default when its file set no cap: it cannot tell which.
        default = (
            ", the default when it sets none"
            if configured == DEFAULT_MAX_PARALLEL_TOOL_CALLS
            else ""
        )
        raise ConfigError(
            f"max_parallel_tool_calls ({shown_short(cap)}) and config (max_parallel_tool_calls "
            f"{configured}{default}) both set the tool-call cap; set it in one of them"
        )
    return cap


def flush_timeout_of(value: float) -> float:
    """``flush_timeout``: seconds above 0, or ``math.inf`` for no bound (R7.49, R12.9)."""
    # NaN is refused: it compares false with everything, and would silently mean no bound.
    if finite_number_error(value) is None or value == math.inf:
        return value
    raise ConfigError(
        f"flush_timeout must be a positive number of seconds (math.inf for no bound), got {shown_short(value)}"
    )
