"""A connection count no host can use is refused when the adapter is built, naming it."""

from __future__ import annotations

import pytest

from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

ADAPTERS = [
    pytest.param(OpenAIModel, "http://127.0.0.1:9/v1", id="openai"),
    pytest.param(AnthropicModel, "http://127.0.0.1:9", id="anthropic"),
]


@pytest.mark.parametrize(("adapter", "base_url"), ADAPTERS)
@pytest.mark.parametrize(
    ("count", "pool_size"),
    [(65_537, 100), (10**12, 10**12), (10**400, 10**400)],
    ids=["one-past", "trillion", "past-a-float"],
)
def test_more_connections_than_a_host_has_ports_are_refused_when_built(
    adapter: type[OpenAIModel | AnthropicModel], base_url: str, count: int, pool_size: int
) -> None:
    """No host reaches one server by more ports; with pools of the default 100, a count
    of 10**12 built ten billion pools, until the process ran out of memory."""
    with pytest.raises(ValueError, match=f"max_connections must be at most 65536, .* not {count}$"):
        adapter(base_url=base_url, api_key="k", max_connections=count, pool_size=pool_size)


@pytest.mark.parametrize(("adapter", "base_url"), ADAPTERS)
def test_as_many_connections_as_a_host_has_ports_are_taken(
    adapter: type[OpenAIModel | AnthropicModel], base_url: str
) -> None:
    """The largest count allowed builds, in pools of the default size."""
    adapter(base_url=base_url, api_key="k", max_connections=65_536)
