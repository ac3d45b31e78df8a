"""The base URL check the adapters and the CLI share.

The SDKs take any string as a base URL; one no request can be sent to
(``localhost:8000/v1``, ``https:///v1``) then fails every request, or building
the client, with no word of where the URL came from. Checked here, it fails
when given, naming the parameter or environment variable that gave it.
"""

from __future__ import annotations

import os
import re
import unicodedata
import urllib.parse

__all__ = [
    "HTTP_URL",
    "base_url_from",
    "check_base_url",
    "client_base_url",
    "is_own_api",
    "needs_key",
    "on_domain",
    "refused_url_shown",
    "url_problem",
]

HTTP_URL = "an http:// or https:// URL"
"""What a base URL must be, as the refusals say."""


def url_problem(url: str) -> str | None:
    """What is wrong with *url* as a base URL (``"must be ..."``), or ``None`` when nothing is.

    It must be an ``http`` or ``https`` URL with a host and, if it has one, a
    port from 0 to 65535, holding no whitespace or control character (which
    URL parsers drop or keep, as they each see fit), and no query: the SDKs
    append each endpoint's path to the URL's path and query as one text, so
    ``.../v1?api-version=1`` would send every request to ``/v1``, its query
    ``api-version=1chat/completions``.
    """
    if any(char.isspace() or unicodedata.category(char) == "Cc" for char in url):
        return f"must be {HTTP_URL} without whitespace or control characters"
    if not _is_http_url(url):
        return f"must be {HTTP_URL}"
    if "?" in url.partition("#")[0]:
        return f"must be {HTTP_URL} without a query, which the request's path would follow"
    return None


def _is_http_url(url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # a port that is no number, or out of range, raises
    except ValueError:  # an unclosed IPv6 bracket, say
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    import httpx2  # the SDKs' URL parser, which refuses some hosts (``256.1.1.1``) too

    try:
        httpx2.URL(url)
    except httpx2.InvalidURL:
        return False
    return True


def check_base_url(url: str, *, source: str) -> str:
    """*url*, once it is a base URL a request can be sent to.

    Does not block: it parses the text only, resolving no host.

    Raises:
        TypeError: *url* is no str, naming *source*.
        ValueError: naming *source* (a parameter or environment variable) and *url*
            (its query and user information left out).
    """
    if not isinstance(url, str):
        raise TypeError(f"{source} must be None or a str, got {url!r}")
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(f"{source} {problem}, got {refused_url_shown(url)!r}")
    return url


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
"""A URL scheme (RFC 3986)."""


def refused_url_shown(url: str) -> str:
    """*url* as a refusal shows it: all before its last ``@`` as ``...`` (user information,
    which a gateway may take a key in) and its query or fragment as ``?...`` or ``#...``.

    Taken apart by hand, as a refused URL may be one no parser takes: the ``@`` is
    looked for over the whole URL, since a password holding ``/`` or ``?`` is what
    gets one refused, and a path or query holding an ``@`` is then hidden with it.
    """
    scheme, separator, rest = url.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        # A "://" later on (in a query, a fragment or a password) ends no scheme.
        scheme, separator, rest = "", "", url
    _, at, after = rest.rpartition("@")
    if at:
        rest = "...@" + after
    cuts = [index for index in (rest.find("?"), rest.find("#")) if index >= 0]
    if cuts:
        cut = min(cuts)
        rest = rest[:cut] + rest[cut] + "..."
    return scheme + separator + rest


def base_url_from(given: str | None, *, variable: str, parameter: str = "base_url") -> str | None:
    """The base URL an adapter sends to: *given*, else the environment *variable*'s.

    ``None`` means the service's own URL: neither is set, or the variable is
    empty, which counts as unset (a ``VARIABLE=`` meant to clear it).

    Raises:
        ValueError: the URL chosen is none a request can be sent to, naming
            *parameter* or *variable* and the URL.
    """
    if given is not None:
        return check_base_url(given, source=parameter)
    url = os.environ.get(variable)
    if not url:
        return None
    return check_base_url(url, source=variable)


def client_base_url(chosen: str | None, *, variable: str, default: str) -> str | None:
    """The base URL to build the SDK client with, for what :func:`base_url_from` *chosen*.

    Given ``None`` the SDK reads *variable* itself, and would take an empty
    value as the URL every request is sent to: the service's *default* then
    goes to it instead. Unset, ``None`` lets the SDK choose (a profile's URL, say).
    """
    if chosen is None and os.environ.get(variable) == "":
        return default
    return chosen


def on_domain(url: str, domain: str) -> bool:
    """Whether *url*'s host is *domain* or a host under it (``api.openai.com`` under
    ``openai.com``).

    A host written with its final dot (``api.openai.com.``, the absolute form,
    which DNS resolves to the same host) is the host without it.
    """
    import httpx2

    host = httpx2.URL(url).host.removesuffix(".")
    return host == domain or host.endswith("." + domain)


def is_own_api(base_url: str | None, domain: str) -> bool:
    """Whether requests go to the API of the provider at *domain*: no base URL means the
    adapter's own provider's."""
    return base_url is None or on_domain(base_url, domain)


HOSTED_DOMAINS = ("openai.com", "anthropic.com", "deepseek.com")
"""The providers' own APIs: each refuses every request without a key."""


def needs_key(base_url: str | None) -> bool:
    """Whether requests to *base_url* (``None``: the adapter's own provider) need a key.

    A compatible server may need none, so an adapter without a key sends a
    placeholder there; to one of these providers' own APIs, whichever adapter is
    pointed there, that would only turn a missing key into a 401 from the server,
    so the adapter sends nothing and fails ``MISSING_CREDENTIALS`` first.
    """
    return base_url is None or any(on_domain(base_url, domain) for domain in HOSTED_DOMAINS)
