"""The system prompt and tool list of a request (R7.51-R7.53)."""

from __future__ import annotations

from retinue._errors import HookError
from retinue._request import ToolSchema
from retinue.prompt import Assembly, Section, render

from ._core import AgentCore

__all__ = ["ASSEMBLE", "request_prompt", "request_tools", "static_prompt"]

ASSEMBLE = "system-prompt/assemble"


def _sections(core: AgentCore) -> tuple[Section, ...]:
    """The runtime's sections, shadowed by the agent's own of the same name (R7.51)."""
    merged = {section.name: section for section in core.services.sections}
    merged.update((section.name, section) for section in core.sections)
    return tuple(merged.values())


def _variables(core: AgentCore) -> dict[str, str | None]:
    """The runtime's variables, shadowed by the agent's own where it has a value (R7.51).

    Resumed without a model, the agent goes on with the stored one (see
    ``seed_config``): its model and provider are the stored ones too, unless
    the options give a provider. Like an option's, they are those it was made
    with, whatever model an ``agent/request`` listener picks later.
    """
    options = core.options
    model, provider = options.model, options.provider
    stored = core.stored_config if model is None else None
    if stored is not None:
        model = stored.model or None
        provider = provider or stored.provider
    own = {"provider": provider, "model": model, "cwd": core.session.header.cwd}
    merged = dict.fromkeys(own) | dict(core.services.variables)
    merged.update((name, value) for name, value in own.items() if value is not None)
    return merged


def request_tools(core: AgentCore) -> tuple[ToolSchema, ...]:
    """The agent's tool view in canonical order (R7.51); cached by the registry."""
    services = core.services
    return services.tools.schemas(core.id, services.tool_order)


def static_prompt(core: AgentCore) -> str:
    """The system prompt when no assembly listener can change it, rendered once per agent.

    Raises:
        PromptError: a section does not render (not kept: it fails every turn until fixed).
    """
    if core.prompt_text is None:
        core.prompt_text = render(_sections(core), _variables(core))
    return core.prompt_text


async def request_prompt(core: AgentCore) -> tuple[str, tuple[ToolSchema, ...] | None]:
    """The system prompt and tools a ``system-prompt/assemble`` chain made of the assembly.

    The chain may rewrite the whole assembly before every request. Without a
    listener the step uses :func:`static_prompt` and leaves the tools to the
    agent's view instead.

    Raises:
        PromptError: a section does not render (the turn ends with an error).
        HookError: a listener returned something other than an ``Assembly``, or
            one holding something other than sections and tool schemas, or two
            tools of one name.
    """
    hooks = core.services.hooks
    base = Assembly(_sections(core), request_tools(core), _variables(core))
    assembly = await hooks.waterfall_value(ASSEMBLE, base, core.agent, base, scope=core.id)
    _check_contents(assembly)
    return assembly.render(), assembly.tools


def _check_contents(assembly: Assembly) -> None:
    """Refuse what rendering and the request would trip over with a bare ``TypeError``.

    A section's text and the variables are left to rendering, whose
    ``PromptError`` names the section.
    """
    for section in assembly.sections:
        if not isinstance(section, Section):
            raise _wrong(f"a section that is {type(section).__name__}, not Section")
        name: object = section.name
        if not isinstance(name, str):
            raise _wrong(f"a section named {name!r}, not a str")
        order: object = section.order  # what a listener set, whatever the annotation says
        if not isinstance(order, int) or isinstance(order, bool):
            raise _wrong(f"section {section.name!r} with order {order!r}, not an int")
    names: set[str] = set()
    for tool in assembly.tools:
        if not isinstance(tool, ToolSchema):
            raise _wrong(f"a tool that is {type(tool).__name__}, not ToolSchema")
        if tool.name in names:
            # Providers refuse the request (400, tool names must be unique), naming no
            # tool; and a model's call by that name could not tell which was meant.
            raise _wrong(f"two tools named {tool.name!r}")
        names.add(tool.name)


def _wrong(what: str) -> HookError:
    return HookError(f"{ASSEMBLE} returned an Assembly with {what}")
