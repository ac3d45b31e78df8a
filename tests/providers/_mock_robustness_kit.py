"""The real-time deadline, the chat path and the request body the mock robustness modules share."""

from __future__ import annotations

import json
from typing import Any

REAL_DEADLINE = 10.0
CHAT = "/v1/chat/completions"


def chat_body(**extra: Any) -> bytes:
    return json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 64,
            **extra,
        }
    ).encode()
