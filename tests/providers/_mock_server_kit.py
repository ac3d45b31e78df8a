"""The APIs, their paths and the real-time deadline the mock server modules share."""

from __future__ import annotations

APIS = ("chat", "responses", "messages")
REAL_DEADLINE = 10.0


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
