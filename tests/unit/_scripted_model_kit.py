"""A model request, and the chunks a ScriptedModel streams for it, for the ScriptedModel tests."""

from __future__ import annotations

from retinue._content import Message
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue._stream import StreamChunk
from retinue.testing import ScriptedModel


def request(model: str = "m", *messages: Message) -> ModelRequest:
    """A request to *model* carrying *messages*."""
    return ModelRequest(LlmCallConfig(model), MessageHistory(list(messages)))


async def play(model: ScriptedModel, req: ModelRequest | None = None) -> list[StreamChunk]:
    """The chunks *model* streams for *req* (a request to model ``m`` by default)."""
    return [chunk async for chunk in model.stream(req or request())]
