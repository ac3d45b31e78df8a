"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

import hypothesis.strategies as st

from retinue._lossless import JsonValue

json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
"""Any lossless JSON value, small: nested arrays and objects of finite numbers and short text."""
