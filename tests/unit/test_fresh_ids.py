"""Fresh agent ids, ``<label>-session-<uuid4>`` (R13.3), and the label read back from one."""

from __future__ import annotations

import pytest

from retinue._fresh_ids import fresh_id, label_of

_UUID = "0b9d6a5e-3f4c-4d2a-9e1f-7a6b5c4d3e2f"


@pytest.mark.parametrize("label", ["writer", "a", "my-session-writer", "x-session-", "日本"])
def test_a_fresh_id_gives_back_its_label(label: str) -> None:
    """R13.3: the label is what comes before the last ``-session-``, whatever it holds."""
    agent_id = fresh_id(label)
    assert agent_id.startswith(f"{label}-session-")
    assert label_of(agent_id) == label


@pytest.mark.parametrize(
    "agent_id",
    [
        "writer",
        "writer-session-",
        f"-session-{_UUID}",
        "hand-session-" + "z" * 36,
        f"writer-session-{_UUID.upper()}",
        f"writer-session-{_UUID}-2",
        f"writer-session-{_UUID.replace('-4d2a-', '-1d2a-')}",
    ],
)
def test_an_id_of_another_shape_has_no_label(agent_id: str) -> None:
    """An id given by hand is no fresh id unless it ends as one does: a uuid4 as
    ``str(uuid.uuid4())`` writes it after ``-session-`` and a label before."""
    assert label_of(agent_id) is None
