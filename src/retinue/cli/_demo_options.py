"""The ``demo`` command's options: parsed, checked, and told apart by provider."""

from __future__ import annotations

import argparse
import math

import retinue
from retinue.providers._urls import base_url_from, refused_url_shown, url_problem

__all__ = ["DEFAULT_LATENCY", "add_options", "base_url_variable_problem", "unused_option"]


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` command's options to *parser*."""
    parser.add_argument(
        "--agents", type=_at_least_one, default=20, help="how many agents (default 20)"
    )
    parser.add_argument(
        "--turns",
        type=_at_least_one,
        default=3,
        help=(
            "prompts per agent (default 3); the agent the demo steers may run one turn "
            "more, when the steering arrives after its turn's last step"
        ),
    )
    parser.add_argument(
        "--latency",
        type=_seconds,
        help=f"model latency in seconds (mock/scripted; default {DEFAULT_LATENCY})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=7,
        help="seed of the demo's random choices (cities, the agents steered and cancelled) and "
        "of the mock server's replies; timing on the real clock still varies a run",
    )
    parser.add_argument(
        "--provider",
        choices=("mock", "scripted", "openai", "anthropic"),
        default="mock",
        help="mock: the real OpenAI adapter against the embedded mock server (default); "
        "scripted: an in-process ScriptedModel; openai/anthropic: the real service "
        "(needs OPENAI_API_KEY / ANTHROPIC_API_KEY)",
    )
    parser.add_argument("--model", type=_given, help="model name (openai/anthropic only)")
    parser.add_argument(
        "--base-url", type=_base_url, help="the service's base URL (openai/anthropic only)"
    )
    parser.add_argument(
        "--store",
        type=_store_spec,
        default="sqlite:retinue.db",
        help="sqlite:PATH | jsonl:DIR | postgres:DSN | memory (default sqlite:retinue.db)",
    )
    parser.add_argument(
        "--no-live",
        action="store_true",
        help=(
            "draw no live table; the summary is still printed, and after it, when the "
            "sessions are stored, the closing `retinue sessions list` hint"
        ),
    )


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _given(text: str) -> str:
    """Refuse an empty value (an unset ``"$VARIABLE"``): taken as not given, it would
    send the run to the default model or the real service."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r}")
    return text


def _base_url(text: str) -> str:
    """Refuse a base URL no request could be sent to (``localhost:8000/v1``) as the
    adapters do: the option is named by argparse, so the complaint is the problem alone,
    the URL shown as the adapters show it (without a query that may hold a key)."""
    problem = url_problem(_given(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}, got {refused_url_shown(text)!r}")
    return text


def _seconds(text: str) -> float:
    """Check a duration when the command line is parsed: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


STORE_FORMS = "sqlite:PATH, jsonl:DIR, postgres:DSN or memory"
"""The ``--store`` values the demo takes, as its errors list them."""


def _store_spec(spec: str) -> str:
    """Check a ``--store`` value when the command line is parsed, not mid-run."""
    if spec.partition(":")[0] == "memory" and spec != "memory":
        raise argparse.ArgumentTypeError(f"invalid store {spec!r}: memory takes no location")
    if spec != "memory":
        from ._sessions import parse_store_spec

        try:
            parse_store_spec(spec, forms=STORE_FORMS)
        except retinue.ConfigError as exc:  # a path no file can have
            raise argparse.ArgumentTypeError(exc.message) from None
    return spec


SERVICE_PROVIDERS = ("openai", "anthropic")
"""The providers that take --model and --base-url: mock and scripted answer in this process."""

DEFAULT_LATENCY = 0.05
"""Seconds the mock and scripted models take before answering, unless --latency says."""


_USED_BY = {
    "model": SERVICE_PROVIDERS,
    "base_url": SERVICE_PROVIDERS,
    "latency": ("mock", "scripted"),
}
"""Options only some providers use, by their argparse destination."""


def unused_option(args: argparse.Namespace) -> str | None:
    """The complaint about an option the chosen provider would silently ignore, if any."""
    for dest, providers in _USED_BY.items():
        if getattr(args, dest) is not None and args.provider not in providers:
            option = "--" + dest.replace("_", "-")
            uses = f"only --provider {' or '.join(providers)} uses it"
            return f"argument {option}: {uses}, not {args.provider}"
    return None


BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
"""Where a service's adapter takes its base URL from when --base-url is not given."""


def base_url_variable_problem(args: argparse.Namespace) -> str | None:
    """The complaint about the base URL the environment gives the run, when it is no URL.

    The adapter would refuse it too, but only once the run has started, as
    a store's failure would be reported. Empty, it counts as unset.
    """
    variable = BASE_URL_VARIABLES.get(args.provider)
    if variable is None or args.base_url is not None:
        return None
    try:
        base_url_from(None, variable=variable)
    except ValueError as exc:
        return str(exc)
    return None
