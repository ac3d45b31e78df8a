"""Ctrl-C, and a ``SystemExit``, reach the caller of ``open_mock_server`` as themselves,
wherever they land; landing in a connection task, they end its block first."""

from __future__ import annotations

import contextlib
import json

import httpx2
import pytest
import trio

from retinue.providers.mock import MockCall, MockResponse, Policy, Timing, open_mock_server

from ._mock_server_kit import REAL_DEADLINE

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n" % len(BODY) + BODY
)


def _interrupted(_call: MockCall) -> MockResponse:
    # Trio raises Ctrl-C in whatever task runs when it comes: here, a connection's.
    raise KeyboardInterrupt


async def _serve_one_interrupted_request() -> BaseException | None:
    """What ``open_mock_server`` raises when Ctrl-C lands in a connection task."""
    try:
        async with (
            open_mock_server(_interrupted) as server,
            httpx2.AsyncClient(base_url=server.base_url) as client,
        ):
            # Cancelled as it waits for the answer: the interrupt ends the block first.
            await client.post("/v1/chat/completions", json={"model": "m", "messages": []})
            await trio.sleep_forever()
    # Caught whole, a group too: one reaching pytest would end the whole run as Ctrl-C does.
    except BaseException as exc:
        return exc
    return None  # pragma: no cover - the block never ends on its own


async def test_ctrl_c_in_a_connection_task_leaves_the_server_bare() -> None:
    """A ``KeyboardInterrupt`` raised in one of the server's connection tasks comes out of
    ``open_mock_server`` as itself, as one raised in its block does, not inside a group
    of groups (the connection's nursery, the listeners', the server's own), which an
    ``except KeyboardInterrupt`` around the server does not catch."""
    with trio.fail_after(REAL_DEADLINE):
        raised = await _serve_one_interrupted_request()
    assert type(raised) is KeyboardInterrupt, repr(raised)
    # Not the block's cancel, which the interrupt caused: raised as it is handled, it
    # takes that as its context.
    assert raised.__context__ is None, repr(raised.__context__)


def _exiting(_call: MockCall) -> MockResponse:
    raise SystemExit(3)


async def _interrupted_while_served(
    latency: float, error: BaseException | None, policy: Policy = _interrupted
) -> tuple[BaseException, list[bytes | int]]:
    """What ``open_mock_server`` raises when Ctrl-C (or what else *policy* raises) lands in
    a connection task while the block waits for that connection's answer, and what the
    block saw: the connections still open when it was cancelled, else the bytes it got
    (``b""``: its connection cut). As it is cancelled the block raises *error*, if given,
    as a cleanup that fails does.
    """
    seen: list[bytes | int] = []
    try:
        async with (
            contextlib.AsyncExitStack() as stack,
            open_mock_server(policy, timing=Timing(latency=latency)) as server,
        ):
            host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            stack.push_async_callback(stream.aclose)
            await stream.send_all(REQUEST)
            try:
                seen.append(await stream.receive_some())
            except trio.Cancelled:
                seen.append(server.statistics().connections_open)
                if error is not None:
                    raise error from None
                raise
    # Caught whole, as above: Ctrl-C reaching pytest would end the whole run.
    except BaseException as exc:
        return exc, seen
    raise AssertionError(f"open_mock_server raised nothing; the block saw {seen}")


@pytest.mark.parametrize("latency", [0.0, 0.001])
async def test_ctrl_c_in_a_connection_task_ends_the_block_first_its_connection_open(
    latency: float,
) -> None:
    """Ctrl-C in a connection task cancels the block while that connection stays open, with
    no latency or with one, so a runtime in the block ends its turns before the server
    closes the connections they stream from; then it comes out of ``open_mock_server``,
    the block's cancel not its context."""
    with trio.fail_after(REAL_DEADLINE):
        raised, seen = await _interrupted_while_served(latency, None)
    assert type(raised) is KeyboardInterrupt, repr(raised)
    assert raised.__context__ is None
    assert seen == [1]


async def test_ctrl_c_in_a_connection_task_wins_over_the_block_s_error_as_it_ends() -> None:
    """A block that raises its own error as it is cancelled gets Ctrl-C out of
    ``open_mock_server``, its error chained as the context, as Python chains one raised
    while another is handled, not its error alone, Ctrl-C lost."""
    with trio.fail_after(REAL_DEADLINE):
        raised, _ = await _interrupted_while_served(0.0, ConnectionError("a cleanup failed"))
    assert type(raised) is KeyboardInterrupt, repr(raised)
    assert isinstance(raised.__context__, ConnectionError)


@pytest.mark.parametrize("latency", [0.0, 0.001])
async def test_a_policy_s_system_exit_ends_the_block_first_its_connection_open(
    latency: float,
) -> None:
    """A policy's ``SystemExit`` cancels the block while its connection stays open, as
    Ctrl-C does, then comes out of ``open_mock_server``, its status kept."""
    with trio.fail_after(REAL_DEADLINE):
        raised, seen = await _interrupted_while_served(latency, None, _exiting)
    assert type(raised) is SystemExit, repr(raised)
    assert raised.code == 3
    assert seen == [1]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConnectionError("a cleanup failed"), SystemExit),
        (KeyboardInterrupt(), KeyboardInterrupt),
        (BaseExceptionGroup("the block's nursery", [KeyboardInterrupt()]), BaseExceptionGroup),
    ],
    ids=["an error", "ctrl-c", "ctrl-c in a group"],
)
async def test_a_policy_s_system_exit_beside_the_block_s_own_ending(
    error: BaseException, expected: type[BaseException]
) -> None:
    """A block raising its own error as it is cancelled gets the policy's ``SystemExit``,
    its error as the context; Ctrl-C the block raises wins over it, bare or in a group of
    the block's own nursery, raised as the block raised it (the group's Ctrl-C not lost
    to the SystemExit)."""
    with trio.fail_after(REAL_DEADLINE):
        raised, _ = await _interrupted_while_served(0.0, error, _exiting)
    assert type(raised) is expected, repr(raised)
    if expected is BaseExceptionGroup:
        assert raised is error
    if expected is SystemExit:
        assert raised.__context__ is error


async def _interrupted_accept(_listener: trio.SocketListener) -> trio.SocketStream:
    await trio.sleep(0.05)  # a connection waits in the backlog meanwhile
    raise KeyboardInterrupt  # Ctrl-C lands in the listener's task


async def _interrupted_in_accept() -> BaseException | None:
    """What ``open_mock_server`` raises when Ctrl-C lands in its accept and the block ends
    as soon as it sees its waiting connection cut (closed after the server, as above)."""
    try:
        async with contextlib.AsyncExitStack() as stack, open_mock_server() as server:
            host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            stack.push_async_callback(stream.aclose)
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.receive_some()
    # Caught whole, as above: Ctrl-C reaching pytest would end the whole run.
    except BaseException as exc:
        return exc
    return None


async def test_ctrl_c_in_the_listener_task_survives_the_block_ending_at_the_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C landing in the server's accept comes out of ``open_mock_server`` though the
    block ends as soon as it sees its waiting connection cut by the listener's close: the
    ``Cancelled`` raised as trio closes the listener does not take its place, in any run
    (it runs five times, as the two race)."""
    monkeypatch.setattr(trio.SocketListener, "accept", _interrupted_accept)
    with trio.fail_after(REAL_DEADLINE):
        raised = [await _interrupted_in_accept() for _ in range(5)]
    assert [type(exc) for exc in raised] == [KeyboardInterrupt] * 5, raised
