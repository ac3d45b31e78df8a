"""A public test kit, like ``trio.testing``: a scripted model, log invariant checkers, a store wrapper.

``import retinue`` does not import this package.
"""

from __future__ import annotations

from retinue.testing._checks import (
    InvariantError,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from retinue.testing._rebuild import RebuildCheckedModel, check_request_rebuild
from retinue.testing._scripted import (
    Script,
    ScriptedModel,
    ScriptedModelStatistics,
    ScriptExhaustedError,
    StepFunction,
)
from retinue.testing._steps import (
    CallTools,
    CutAtMaxTokens,
    FinishAborted,
    FinishWithError,
    Hang,
    RaiseMidStream,
    RawChunks,
    Reply,
    Step,
    ToolCallSpec,
)
from retinue.testing._stores import DelegatingStore

__all__ = [
    "CallTools",
    "CutAtMaxTokens",
    "DelegatingStore",
    "FinishAborted",
    "FinishWithError",
    "Hang",
    "InvariantError",
    "RaiseMidStream",
    "RawChunks",
    "RebuildCheckedModel",
    "Reply",
    "Script",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ScriptedModelStatistics",
    "Step",
    "StepFunction",
    "ToolCallSpec",
    "check_history_replay",
    "check_no_dangling_tool_calls",
    "check_request_rebuild",
    "check_session_invariants",
]
