"""A mock OpenAI/Anthropic server for tests, demos and benchmarks.

It speaks Chat Completions, Responses and Anthropic Messages (streaming and
not), answers through a policy (echo/tool-using by default, scripted, replayed
recordings, injected faults) and can add latency::

    async with open_mock_server(FaultPolicy(EchoPolicy(), rate=0.1)) as server:
        async with OpenAIModel(base_url=server.openai_base_url, api_key="test") as model:
            ...
"""

from __future__ import annotations

from ._asks import ToolChoice
from ._policy import (
    EchoPolicy,
    FaultPolicy,
    Policy,
    ReplayPolicy,
    ScriptedPolicy,
    example_arguments,
    load_exchange,
)
from ._server import MockServer, MockServerStatistics, open_mock_server
from ._timing import Delay, Endless, Timing
from ._values import (
    FAULT_KINDS,
    Fault,
    FaultKind,
    MockCall,
    MockReply,
    MockResponse,
    MockToolCall,
    RawReply,
)

__all__ = [
    "FAULT_KINDS",
    "Delay",
    "EchoPolicy",
    "Endless",
    "Fault",
    "FaultKind",
    "FaultPolicy",
    "MockCall",
    "MockReply",
    "MockResponse",
    "MockServer",
    "MockServerStatistics",
    "MockToolCall",
    "Policy",
    "RawReply",
    "ReplayPolicy",
    "ScriptedPolicy",
    "Timing",
    "ToolChoice",
    "example_arguments",
    "load_exchange",
    "open_mock_server",
]
