"""A policy given a collection (or a flag) of the wrong shape refuses it when built, naming the field.

A fault kind given alone is refused as no collection of kinds, not taken for its
letters and refused as the kind ``s``; a replay of values that are no recorded replies
is refused, not left to fail each request they answer with a 500 a test takes for the
server's own.
"""

from __future__ import annotations

import pytest

from retinue.providers.mock import (
    FAULT_KINDS,
    FaultKind,
    FaultPolicy,
    MockReply,
    RawReply,
    ReplayPolicy,
    ScriptedPolicy,
)


@pytest.mark.parametrize("kinds", ["stall", None, 5])
def test_fault_policy_kinds_not_a_collection_is_type_error(kinds: object) -> None:
    """One kind (or no collection at all) is refused as not a collection of kinds."""
    with pytest.raises(TypeError, match=r"FaultPolicy\.kinds must be a collection of fault kinds"):
        FaultPolicy(kinds=kinds)  # type: ignore[arg-type]


def test_fault_policy_one_kind_in_a_tuple_is_taken() -> None:
    """The kind in a collection is taken as itself."""
    assert FaultPolicy(kinds=("stall",)).kinds == ("stall",)


def test_fault_policy_kinds_given_as_a_set_keep_one_order_whatever_the_hashes() -> None:
    """A set's kinds are taken in the order of FAULT_KINDS, so a seed draws the same kinds
    in every process (a set's own order follows the process's str hashes)."""
    kinds: set[FaultKind] = {"stall", "rate_limit", "overloaded"}
    assert FaultPolicy(kinds=kinds).kinds == tuple(k for k in FAULT_KINDS if k in kinds)


@pytest.mark.parametrize(
    "replies",
    [[1], [MockReply("hi")], "recorded", None],
    ids=["number", "mock-reply", "str", "none"],
)
def test_replay_policy_replies_not_raw_replies_is_type_error(replies: object) -> None:
    """Replies that are not RawReply values (or no collection) are refused when built."""
    with pytest.raises(TypeError, match=r"ReplayPolicy\.replies must be RawReply values"):
        ReplayPolicy(replies)  # type: ignore[arg-type]


def test_replay_policy_recorded_reply_is_taken() -> None:
    """A recorded reply is taken as itself."""
    raw = RawReply(200, (("content-type", "application/json"),), b"{}")
    assert ReplayPolicy([raw]).replies == (raw,)


@pytest.mark.parametrize("cycle", ["no", 1, None])
def test_scripted_policy_cycle_not_a_bool_is_type_error(cycle: object) -> None:
    """A cycle flag that is no bool is refused, not taken as true to cycle the script."""
    with pytest.raises(TypeError, match=r"ScriptedPolicy\.cycle must be a bool"):
        ScriptedPolicy([MockReply("hi")], cycle=cycle)  # type: ignore[arg-type]
