"""retinue: an actor-model runtime for LLM agents on trio."""

from __future__ import annotations
