"""What comes out of a runtime's nursery bare: Ctrl-C, else a SystemExit (R12.10)."""

from __future__ import annotations

from retinue._endings import lone_ending


def test_ctrl_c_beside_a_system_exit_is_the_one_raised() -> None:
    """R12.10: Ctrl-C is the user's: beside a task's SystemExit it is the one raised, whichever
    task raised first or the body raised, not the first leaf."""
    status, interrupt = SystemExit(3), KeyboardInterrupt()
    both = BaseExceptionGroup("g", [BaseExceptionGroup("a", [status]), interrupt])
    assert (lone_ending(both, None), lone_ending(both, status)) == (interrupt, interrupt)


def test_a_lone_system_exit_is_raised_and_one_beside_a_failure_is_not() -> None:
    """R12.10: a SystemExit alone comes out bare; beside an ordinary failure the group does."""
    status = SystemExit(3)
    assert lone_ending(BaseExceptionGroup("g", [BaseExceptionGroup("a", [status])]), None) is status
    assert lone_ending(BaseExceptionGroup("g", [status, ValueError("x")]), None) is None


def test_ctrl_c_in_the_body_beside_a_lone_system_exit_is_the_one_raised() -> None:
    """R12.10: Ctrl-C landing in the body as it unwinds from a SystemExit's cancel, the group
    holding only that SystemExit, is the one raised, not the SystemExit with the Ctrl-C lost."""
    status, interrupt = SystemExit(3), KeyboardInterrupt()
    group = BaseExceptionGroup("g", [BaseExceptionGroup("a", [status])])
    assert lone_ending(group, interrupt) is interrupt


def test_ctrl_c_in_a_group_of_the_body_beside_a_lone_system_exit_is_the_one_raised() -> None:
    """R12.10: Ctrl-C landing in a task of a nursery the body opened comes from the body in a group:
    beside a lone SystemExit that group is raised, as the body raised it, not the SystemExit with
    the Ctrl-C lost."""
    status = SystemExit(3)
    interrupted = BaseExceptionGroup("body", [KeyboardInterrupt()])
    group = BaseExceptionGroup("g", [BaseExceptionGroup("a", [status])])
    assert lone_ending(group, interrupted) is interrupted
