"""Whether a call may run in parallel: its tool's ``parallel_safe``, judged for its arguments
(R9.8), where anything but a plain yes means exclusive."""

from __future__ import annotations

import inspect
import logging

from retinue._errors import pass_on
from retinue._lossless import FrozenDict, freeze_json

from ._tool import Tool

__all__ = ["parallel_for"]

log = logging.getLogger("retinue.tools")


def parallel_for(tool: Tool | None, arguments: object) -> Tool | None:
    """*tool*, if it runs a call of *arguments* in parallel; else ``None``.

    It does when declared ``parallel_safe=True``, or when its classifier returns
    exactly ``True``, for arguments it finds valid. An unknown tool (``None``),
    invalid arguments, any other value and a raising classifier (a ``SystemExit``
    too; only Ctrl-C passes on) mean exclusive.
    """
    if tool is None or tool.parallel_safe is False:
        return None
    try:
        if type(arguments) is not FrozenDict:  # the loop's parsed arguments are frozen
            arguments = freeze_json(arguments)
        if tool.check_arguments(arguments) is not None:
            return None
        if tool.parallel_safe is True:
            return tool
        verdict = tool.parallel_safe(arguments)
    except BaseException as exc:
        # A SystemExit or a BaseException of the user's is the classifier's failure, as
        # a listener's is: raised on, it would end the step and the agent's driver.
        pass_on(exc)
        log.warning("parallel_safe classifier of %r failed; exclusive", tool.name, exc_info=exc)
        return None
    if inspect.iscoroutine(verdict):
        verdict.close()
    return tool if verdict is True else None
