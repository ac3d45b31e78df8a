"""Checks of an adapter's identity settings when it is built: its name, key and headers."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["check_identity"]


def check_identity(*, provider: object, headers: object, omit: type, **texts: object) -> None:
    """Refuse a *provider* name that is no non-empty ``str``, *headers* that are no
    mapping of ``str`` to ``str`` (or to the SDK's *omit* marker, which drops one of
    its default headers), or any of *texts* (by name) that is neither ``None`` nor a
    ``str``.

    Taken as they were, a wrong one failed every request (a header value that
    is no text), or named the adapter's lane and errors with what no route
    can name.

    Raises:
        TypeError: naming the setting and its value.
    """
    if not isinstance(provider, str) or not provider:
        raise TypeError(f"provider must be a non-empty str, not {provider!r}")
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise TypeError(f"default_headers must be a mapping of str to str, not {headers!r}")
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str | omit):
                raise TypeError(f"default_headers must map str to str, not {name!r} to {value!r}")
    for name, value in texts.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be None or a str, not {value!r}")
