"""The runtime's hook bus as its users see it: each seam's listener typed by what it gets.

Typed here, above every layer whose values the seams carry (an agent, a tool
call, a configured agent's failure), rather than on :class:`~retinue.hooks.HookBus`,
which knows none of them. Each listener type is a callback protocol, so a
lambda keeping a loop variable as a default (``lambda a, s, row=row: ...``)
is still checked, and accepted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, TypeVar, overload

from retinue._content import ContentBlock, Message
from retinue._handle import AgentStatus
from retinue._request import LlmCallConfig
from retinue._sources import MessageSource
from retinue.hooks import (
    ContinuationDecision,
    Listener,
    PostToolDecision,
    PreToolDecision,
    PromptDecision,
    Stop,
)
from retinue.prompt import Assembly
from retinue.providers import RetryNotice
from retinue.session import Event, Session
from retinue.tools import ToolExecution, ToolExecutionResult

if TYPE_CHECKING:
    from retinue.actors import Agent
    from retinue.loop import StepSignal

    from ._configured import ConfigStartFailure

__all__ = ["RuntimeHooks"]

_T = TypeVar("_T")
_Next: TypeAlias = Callable[[], Awaitable[_T]]
"""A middleware listener's last argument: ``await call_next()`` runs the rest of the chain."""
_Returns: TypeAlias = _T | Awaitable[_T]
"""What a listener the bus awaits returns: the value, or an awaitable of it."""
_Unregister: TypeAlias = Callable[[], None]


class _AgentListener(Protocol):
    """A listener of ``agent/created`` or ``agent/disposed``."""

    def __call__(self, agent: Agent, /) -> object: ...


class _StatusListener(Protocol):
    """A listener of ``agent/status``."""

    def __call__(self, agent: Agent, status: AgentStatus, /) -> object: ...


class _QueuedListener(Protocol):
    """A listener of ``agent/queued``."""

    def __call__(
        self, agent: Agent, content: tuple[ContentBlock, ...], info: Mapping[str, object], /
    ) -> object: ...


class _ErrorListener(Protocol):
    """A listener of ``agent/error``."""

    def __call__(self, agent: Agent, turn: int, step: int, error: BaseException, /) -> object: ...


class _SessionStartListener(Protocol):
    """A listener of ``agent/session-start``."""

    def __call__(self, agent: Agent, source: Literal["startup", "resume"], /) -> object: ...


class _RetryListener(Protocol):
    """A listener of ``agent/retry``."""

    def __call__(self, agent: Agent | None, notice: RetryNotice, /) -> object: ...


class _RestartedListener(Protocol):
    """A listener of ``agent/restarted``."""

    def __call__(self, agent: Agent, error: Exception, /) -> object: ...


class _PromptListener(Protocol):
    """A listener of ``agent/prompt-submit``."""

    def __call__(
        self,
        agent: Agent,
        content: tuple[ContentBlock, ...],
        source: MessageSource,
        call_next: _Next[PromptDecision],
        /,
    ) -> _Returns[PromptDecision]: ...


class _PrefixListener(Protocol):
    """A listener of ``agent/session-prefix``."""

    def __call__(
        self,
        agent: Agent,
        prefix: tuple[Message, ...],
        signal: StepSignal,
        call_next: _Next[Sequence[Message]],
        /,
    ) -> _Returns[Sequence[Message]]: ...


class _PreStepListener(Protocol):
    """A listener of ``agent/pre-step``."""

    def __call__(
        self,
        agent: Agent,
        turn: int,
        step: int,
        system_prompt: str,
        prefix: tuple[Message, ...],
        signal: StepSignal,
        /,
    ) -> object: ...


class _RequestListener(Protocol):
    """A listener of ``agent/request``."""

    def __call__(
        self,
        agent: Agent,
        turn: int,
        step: int,
        config: LlmCallConfig,
        call_next: _Next[LlmCallConfig],
        /,
    ) -> _Returns[LlmCallConfig]: ...


class _StepResultListener(Protocol):
    """A listener of ``agent/step-result``."""

    def __call__(
        self, agent: Agent, turn: int, step: int, message: Message, call_next: _Next[Message], /
    ) -> _Returns[Message]: ...


class _ContinuationListener(Protocol):
    """A listener of ``agent/turn-continuation``."""

    def __call__(
        self,
        agent: Agent,
        turn: int,
        decision: ContinuationDecision,
        call_next: _Next[ContinuationDecision],
        /,
    ) -> _Returns[ContinuationDecision]: ...


class _TurnStopListener(Protocol):
    """A listener of ``agent/turn-stop``."""

    def __call__(self, agent: Agent, turn: int, /) -> _Returns[Stop | None]: ...


class _PreExecuteListener(Protocol):
    """A listener of ``tools/pre-execute``."""

    def __call__(
        self, execution: ToolExecution, call_next: _Next[PreToolDecision], /
    ) -> _Returns[PreToolDecision]: ...


class _ExecuteListener(Protocol):
    """A listener of ``tools/execute``."""

    def __call__(
        self, execution: ToolExecution, call_next: _Next[ToolExecutionResult], /
    ) -> _Returns[ToolExecutionResult]: ...


class _PostExecuteListener(Protocol):
    """A listener of ``tools/post-execute``."""

    def __call__(
        self,
        execution: ToolExecution,
        result: ToolExecutionResult,
        call_next: _Next[PostToolDecision],
        /,
    ) -> _Returns[PostToolDecision]: ...


class _ResultListener(Protocol):
    """A listener of ``tools/result``."""

    def __call__(self, execution: ToolExecution, result: ToolExecutionResult, /) -> object: ...


class _SessionListener(Protocol):
    """A listener of ``session/created``."""

    def __call__(self, session: Session, /) -> object: ...


class _EventListener(Protocol):
    """A listener of ``session/event``."""

    def __call__(self, session: Session, event: Event, /) -> object: ...


class _FlushListener(Protocol):
    """A listener of ``session/flush``."""

    def __call__(self, agent: Agent, session: Session, /) -> object: ...


class _AssembleListener(Protocol):
    """A listener of ``system-prompt/assemble``."""

    def __call__(
        self, agent: Agent, assembly: Assembly, call_next: _Next[Assembly], /
    ) -> _Returns[Assembly]: ...


class _ConfigFailureListener(Protocol):
    """A listener of ``agent-loop/config-start-failed``."""

    def __call__(self, failure: ConfigStartFailure, /) -> object: ...


class RuntimeHooks(Protocol):
    """``rt.hooks``: the runtime's :class:`~retinue.hooks.HookBus`, each seam's listener typed.

    A type checker refuses a listener that does not take what its seam passes
    (docs/hooks.md lists it) or returns what the seam cannot use, and a name
    that is no seam. At run time this is the bus itself.
    """

    @overload
    def on(
        self,
        name: Literal["agent/created", "agent/disposed"],
        fn: _AgentListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/status"],
        fn: _StatusListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/queued"],
        fn: _QueuedListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self, name: Literal["agent/error"], fn: _ErrorListener, *, agent: Agent | str | None = None
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/session-start"],
        fn: _SessionStartListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self, name: Literal["agent/retry"], fn: _RetryListener, *, agent: Agent | str | None = None
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/restarted"],
        fn: _RestartedListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/prompt-submit"],
        fn: _PromptListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/session-prefix"],
        fn: _PrefixListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/pre-step"],
        fn: _PreStepListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/request"],
        fn: _RequestListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/step-result"],
        fn: _StepResultListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/turn-continuation"],
        fn: _ContinuationListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent/turn-stop"],
        fn: _TurnStopListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["tools/pre-execute"],
        fn: _PreExecuteListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["tools/execute"],
        fn: _ExecuteListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["tools/post-execute"],
        fn: _PostExecuteListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["tools/result"],
        fn: _ResultListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["session/created"],
        fn: _SessionListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["session/event"],
        fn: _EventListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["session/flush"],
        fn: _FlushListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["system-prompt/assemble"],
        fn: _AssembleListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    @overload
    def on(
        self,
        name: Literal["agent-loop/config-start-failed"],
        fn: _ConfigFailureListener,
        *,
        agent: Agent | str | None = None,
    ) -> _Unregister: ...
    def on(self, name: str, fn: Listener, *, agent: Agent | str | None = None) -> _Unregister:
        """Register *fn* for seam *name*: :meth:`retinue.hooks.HookBus.on`."""
        ...

    def scope_of(self, agent: Agent | str | None) -> str | None:
        """:meth:`retinue.hooks.HookBus.scope_of`."""
        ...

    def watch(self, name: str, fn: Callable[[], None]) -> _Unregister:
        """:meth:`retinue.hooks.HookBus.watch`."""
        ...

    def has_listeners(self, name: str) -> bool:
        """:meth:`retinue.hooks.HookBus.has_listeners`."""
        ...

    def hears(self, name: str, scope: str | None) -> bool:
        """:meth:`retinue.hooks.HookBus.hears`."""
        ...

    def listeners(self, name: str, scope: Agent | str | None = None) -> list[Listener]:
        """:meth:`retinue.hooks.HookBus.listeners`."""
        ...

    def drop_scope(self, scope: str) -> None:
        """:meth:`retinue.hooks.HookBus.drop_scope`."""
        ...

    def emit(self, name: str, *args: object, scope: str | None = None) -> None:
        """:meth:`retinue.hooks.HookBus.emit`."""
        ...

    def emit_raising(self, name: str, *args: object, scope: str | None = None) -> None:
        """:meth:`retinue.hooks.HookBus.emit_raising`."""
        ...

    async def serial(self, name: str, *args: object, scope: str | None = None) -> None:
        """:meth:`retinue.hooks.HookBus.serial`."""
        ...

    async def strict_serial(self, name: str, *args: object, scope: str | None = None) -> object:
        """:meth:`retinue.hooks.HookBus.strict_serial`."""
        ...

    async def waterfall(
        self,
        name: str,
        default: Callable[[], Awaitable[_T]],
        *args: object,
        scope: str | None = None,
    ) -> _T:
        """:meth:`retinue.hooks.HookBus.waterfall`."""
        ...

    async def waterfall_value(
        self, name: str, value: _T, *args: object, scope: str | None = None
    ) -> _T:
        """:meth:`retinue.hooks.HookBus.waterfall_value`."""
        ...

    async def parallel(self, name: str, *args: object, scope: str | None = None) -> None:
        """:meth:`retinue.hooks.HookBus.parallel`."""
        ...
