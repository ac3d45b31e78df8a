"""Arguments whose reading raises are the call's error result, not the pipeline's raise (R9.2, R9.3)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
import trio

from retinue.tools import ToolExecution
from tests.scenarios._tool_pipeline_kit import Seams, failed, setup, shape


class _BrokenMapping(Mapping[str, object]):
    """A mapping of the caller's that names a key it then cannot give."""

    def __getitem__(self, key: str) -> object:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(["text"])

    def __len__(self) -> int:
        return 1


class _BrokenList(list[object]):
    """A list of the caller's whose iteration raises."""

    def __iter__(self) -> Iterator[object]:
        raise RuntimeError("the list cannot be read")


class _Exiting(list[object]):
    """A list whose iteration raises SystemExit, as a script's sys.exit() would."""

    def __iter__(self) -> Iterator[object]:
        raise SystemExit(3)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (_BrokenMapping(), "KeyError: 'text'"),
        ({"text": _BrokenList()}, "the list cannot be read"),
        ({"text": _Exiting()}, "reading them raised SystemExit: 3"),
    ],
    ids=["mapping", "nested-list", "system-exit"],
)
async def test_arguments_whose_reading_raises_are_a_final_invalid_arguments_result(
    arguments: object, problem: str, autojump_clock: trio.abc.Clock
) -> None:
    """R9.2, R9.3 stage 1: arguments that cannot be read as JSON (their container raises as
    it is read) give a final INVALID_ARGUMENTS result naming the failure, as arguments that
    are not JSON do: pre- and post-execute are skipped and execute raises nothing.
    """
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    execution = ToolExecution("call-1", "echo", arguments)  # type: ignore[arg-type]
    with trio.fail_after(5):
        result = await registry.execute(execution)
    assert shape(result) == failed(
        f'invalid arguments for tool "echo": arguments: could not be read: {problem}',
        "INVALID_ARGUMENTS",
    )
    assert seams.pre == []
    assert seams.post == []
