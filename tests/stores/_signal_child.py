"""Child process of the stop-signal tests: one agent on a SQLite file, its tool stopped midway.

Usage: ``python -m tests.stores._signal_child MODE PATH``. The agent's one turn
calls ``charge_card``, whose body prints ``charging`` and then, for MODE
``kill``, SIGKILLs its own process (a crash mid-tool), or else waits to be
stopped by the SIGTERM the parent sends; for MODE ``term-twice`` the flush
after that SIGTERM prints ``final flush`` and takes a second, for a second
SIGTERM to land in. Both run the patterns the documentation gives: a
``tools/pre-execute`` listener flushes the session so the call is on record
before its body runs, and a SIGTERM cancels the runtime as Ctrl-C would end it.
Prints ``exited`` once the runtime has closed.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import retinue
from retinue.session import Session
from retinue.stores import SQLiteStore
from retinue.testing import CallTools, DelegatingStore, ScriptedModel, ToolCallSpec

MODE = sys.argv[1]
_stopping: list[bool] = []


@retinue.tool
async def charge_card(cents: int) -> str:
    """Charge the customer's card.

    Args:
        cents: The amount.
    """
    print("charging", flush=True)
    if MODE == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    await trio.sleep_forever()
    return "charged"


class SlowFinalFlush(DelegatingStore):
    """Its flush once the SIGTERM came takes a second (``term-twice``)."""

    async def flush(self, session: Session) -> None:
        if _stopping and MODE == "term-twice":
            print("final flush", flush=True)
            await trio.sleep(1)
        await self.store.flush(session)


def record_calls_first(
    rt: retinue.Runtime,
) -> Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    async def before_the_body(execution: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
        agent = rt.agents.get(execution.agent_id)
        if agent is not None:
            await rt.store.flush(agent.session)
        return await call_next()

    return before_the_body


async def serve(path: str) -> None:
    model = ScriptedModel([CallTools([ToolCallSpec("charge_card", '{"cents": 1250}')])])
    store = SlowFinalFlush(SQLiteStore(path))
    async with retinue.open_runtime(models=model, tools=[charge_card], store=store) as rt:
        rt.hooks.on("tools/pre-execute", record_calls_first(rt))
        agent = await rt.create_agent(
            "shop", retinue.AgentOptions(model="scripted"), session_id="shop-1"
        )
        await agent.ask("Charge 12.50.")


async def main(path: str) -> None:
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            serving = trio.CancelScope()

            async def stop_on_sigterm() -> None:
                async for _ in signals:
                    _stopping.append(True)
                    serving.cancel()

            nursery.start_soon(stop_on_sigterm)
            with serving:
                await serve(path)
            nursery.cancel_scope.cancel()
    print("exited", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[2])
