"""Message sources: where model-visible content came from (R1.3, R1.4)."""

from __future__ import annotations

from typing import final

import attrs

from ._content import ContentBlock, as_context, plain, whole

__all__ = ["USER_SOURCE", "HookContext", "MessageSource", "resolve_source"]


@final
@attrs.frozen
class MessageSource:
    """Where content came from (R1.3): ``kind="user"`` or ``kind="plugin"`` with a name.

    The kinds are open (R1.3): another kind of your own is logged as given.
    Built, it checks only that both fields are strings (``TypeError``); an
    agent verb or a :class:`HookContext` given a plugin source without a
    name, or an empty kind, refuses it with ``ValueError``: plugin content
    must say whose it is. A verb's ``source="name"`` is short for
    ``MessageSource("plugin", "name")``; ``source="user"`` is refused with
    ``ValueError`` (``None`` is the user).
    """

    kind: str = attrs.field(
        default="user", converter=whole, validator=attrs.validators.instance_of(str)
    )
    plugin: str | None = attrs.field(
        default=None,
        converter=whole,
        validator=attrs.validators.optional(attrs.validators.instance_of(str)),
    )


USER_SOURCE = MessageSource()


def resolve_source(source: MessageSource | str | None) -> MessageSource:
    """An omitted source is the user (R1.3); a string names a plugin.

    Raises:
        TypeError: *source* is none of these.
        ValueError: *source* names no plugin (``""``, or a plugin source without
            a name) or has an empty kind: plugin content must label itself
            (R1.3), and a log could not tell whose it was. Or it is the str
            ``"user"``, which would name a plugin called "user".
    """
    if source is None:
        return USER_SOURCE
    if isinstance(source, str):
        if type(source) is not str:
            # Judged by its text, which the log keeps: a subclass's own == need not match.
            source = plain(source)
        if not source:
            raise ValueError(
                "source '' names no plugin: pass the plugin's name, or None for the user"
            )
        if source == USER_SOURCE.kind:
            # Taken as a plugin's name, the user's own words would be shown to the
            # model as a plugin's (<context source="plugin">) and logged as one.
            raise ValueError(
                "source 'user' would name a plugin called 'user': a str names a plugin; "
                "pass None for the user"
            )
        return MessageSource("plugin", source)
    if not isinstance(source, MessageSource):
        raise TypeError(
            "source must be a MessageSource, a str naming a plugin, or None, "
            f"got {type(source).__name__}"
        )
    if source.kind == "plugin" and not source.plugin:
        raise ValueError(f"a plugin source must name its plugin, got {source!r}")
    if not source.kind:
        raise ValueError(f"a source's kind must not be empty, got {source!r}")
    return source


@final
@attrs.frozen
class HookContext:
    """Content a seam asks the runtime to also show the model (R1.4).

    Its source is resolved as the agent verbs resolve theirs: ``None`` is the
    user, a str names a plugin. Its content may say nothing (no block, or only text
    of whitespace), which the verbs refuse: a decision takes such a context as none,
    and a ``Continue`` refuses it as its reason.
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=as_context)
    source: MessageSource = attrs.field(default=USER_SOURCE, converter=resolve_source)
