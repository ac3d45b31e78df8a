"""A connection count past what a host can use is taken as the most it can use: 65,536."""

from __future__ import annotations

import pytest

from retinue.providers._pools import ShardedTransport
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

ADAPTERS = [
    pytest.param(OpenAIModel, "http://127.0.0.1:9/v1", id="openai"),
    pytest.param(AnthropicModel, "http://127.0.0.1:9", id="anthropic"),
]


def _pools(model: OpenAIModel | AnthropicModel) -> ShardedTransport:
    transport = model._client._client._transport
    assert isinstance(transport, ShardedTransport)
    return transport


@pytest.mark.parametrize(("adapter", "base_url"), ADAPTERS)
@pytest.mark.parametrize(
    ("count", "pool_size", "pools"),
    [(100_000, 1000, 66), (65_537, 100, 656), (10**12, 10**12, 1), (10**400, 10**400, 1)],
    ids=["hundred-thousand", "one-past", "trillion", "past-a-float"],
)
def test_more_connections_than_a_host_has_ports_are_as_many_as_it_has(
    adapter: type[OpenAIModel | AnthropicModel],
    base_url: str,
    count: int,
    pool_size: int,
    pools: int,
) -> None:
    """No host reaches one server by more than 65,536 ports: a larger count builds pools for
    that many, so such a count is not refused, as 100,000 in pools of 1000 is not (it is
    10**12 in pools of 100, ten billion pools, that would run out of memory)."""
    model = adapter(base_url=base_url, api_key="k", max_connections=count, pool_size=pool_size)
    assert (_pools(model).max_connections, _pools(model).shards) == (65_536, pools)


@pytest.mark.parametrize(("adapter", "base_url"), ADAPTERS)
def test_as_many_connections_as_a_host_has_ports_are_taken(
    adapter: type[OpenAIModel | AnthropicModel], base_url: str
) -> None:
    """The largest count a host can use builds as it is, in pools of the default size."""
    model = adapter(base_url=base_url, api_key="k", max_connections=65_536)
    assert (_pools(model).max_connections, _pools(model).shards) == (65_536, 656)
