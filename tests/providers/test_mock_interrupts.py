"""Ctrl-C, and a ``SystemExit``, reach the caller of ``open_mock_server`` as themselves,
wherever they land."""

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
            with contextlib.suppress(httpx2.TransportError):  # the connection is closed
                await client.post("/v1/chat/completions", json={"model": "m", "messages": []})
            await trio.sleep_forever()  # until the interrupt cancels the block
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


async def _interrupted_until_cut(
    latency: float, error: BaseException | None, policy: Policy = _interrupted
) -> BaseException:
    """What ``open_mock_server`` raises when Ctrl-C (or what else *policy* raises) lands in
    a connection task and the block returns (or raises *error*) as soon as it sees that
    connection cut.

    The client's socket closes only after the server has, so nothing but the cut ends
    the block's wait: it ends while the connection task still closes its stream.
    """
    try:
        async with (
            contextlib.AsyncExitStack() as stack,
            open_mock_server(policy, timing=Timing(latency=latency)) as server,
        ):
            host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            stack.push_async_callback(stream.aclose)
            await stream.send_all(REQUEST)
            assert await stream.receive_some() == b""
            if error is not None:
                raise error
    # Caught whole, as above: Ctrl-C reaching pytest would end the whole run.
    except BaseException as exc:
        return exc
    raise AssertionError("open_mock_server raised nothing")


@pytest.mark.parametrize("latency", [0.0, 0.001])
async def test_ctrl_c_in_a_connection_task_survives_the_block_ending_at_the_cut(
    latency: float,
) -> None:
    """Ctrl-C in a connection task comes out of ``open_mock_server`` though the block
    ends as soon as it sees the connection cut, with no latency or with one. The block
    ending cancels the server while that task still closes its stream, and the
    ``Cancelled`` raised there does not take the place of Ctrl-C: the server does not
    exit quietly."""
    with trio.fail_after(REAL_DEADLINE):
        raised = await _interrupted_until_cut(latency, None)
    assert type(raised) is KeyboardInterrupt, repr(raised)
    assert raised.__context__ is None


async def test_ctrl_c_in_a_connection_task_wins_over_the_block_s_error_at_the_cut() -> None:
    """A block that raises its own error as it sees the connection cut gets Ctrl-C out of
    ``open_mock_server``, its error chained as the context, as Python chains one raised
    while another is handled, not its error alone, Ctrl-C lost."""
    with trio.fail_after(REAL_DEADLINE):
        raised = await _interrupted_until_cut(0.0, ConnectionError("the server went away"))
    assert type(raised) is KeyboardInterrupt, repr(raised)
    assert isinstance(raised.__context__, ConnectionError)


@pytest.mark.parametrize("latency", [0.0, 0.001])
async def test_a_policy_s_system_exit_survives_the_block_ending_at_the_cut(
    latency: float,
) -> None:
    """A policy's ``SystemExit`` comes out of ``open_mock_server``, its status kept, though
    the block ends as soon as it sees the connection cut, as Ctrl-C does: the ``Cancelled``
    raised as the connection task closes its stream does not take its place, so the server
    does not exit quietly, the exit lost."""
    with trio.fail_after(REAL_DEADLINE):
        raised = await _interrupted_until_cut(latency, None, _exiting)
    assert type(raised) is SystemExit, repr(raised)
    assert raised.code == 3


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConnectionError("the server went away"), SystemExit),
        (KeyboardInterrupt(), KeyboardInterrupt),
        (BaseExceptionGroup("the block's nursery", [KeyboardInterrupt()]), BaseExceptionGroup),
    ],
    ids=["an error", "ctrl-c", "ctrl-c in a group"],
)
async def test_a_policy_s_system_exit_beside_the_block_s_own_ending_at_the_cut(
    error: BaseException, expected: type[BaseException]
) -> None:
    """A block raising its own error as it sees the connection cut gets the policy's
    ``SystemExit``, its error as the context; Ctrl-C the block raises wins over it, bare
    or in a group of the block's own nursery, raised as the block raised it (the group's
    Ctrl-C not lost to the SystemExit)."""
    with trio.fail_after(REAL_DEADLINE):
        raised = await _interrupted_until_cut(0.0, error, _exiting)
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
