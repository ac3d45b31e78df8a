"""Shared test configuration: environment hygiene, Hypothesis profiles, group unwrapping."""

from __future__ import annotations

import os
import signal
from collections.abc import Generator

import pluggy
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "dev",
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# A suite started in the background of a shell without job control (`cmd &` in a script,
# nohup) inherits SIGINT ignored, and so would every process it starts: the tests that
# send a child Ctrl-C would see it ignored. A handler here is reset to the default in
# each child at exec, where an ignored signal stays ignored.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see real keys or proxies."""
    for name in (*_SECRETS, *_PROXIES):
        monkeypatch.delenv(name, raising=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, pluggy.Result[None], None]:
    """Unwrap single-exception groups so ``pytest.raises``/``xfail(raises=)`` see the error."""
    outcome = yield
    excinfo = outcome.excinfo
    if excinfo is None:
        return
    error = excinfo[1]
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if error is not excinfo[1]:
        outcome.force_exception(error)
