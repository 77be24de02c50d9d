"""``pgbeat.testing.contains``: the subset match of ``assert_enqueued``'s payload, pure."""

from __future__ import annotations

from typing import Any

import pytest

from pgbeat.testing import contains


@pytest.mark.parametrize(
    ("actual", "wanted", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {"b": 1}, False),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 2}}, True),
        ({"a": {"x": 1}}, {"a": {"x": 1, "y": 2}}, False),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [1, 2, 3]}, {"a": [1, 2]}, False),  # lists compare whole
        ({"a": None}, {"a": None}, True),
        ({}, {"a": None}, False),  # a key given must be there
        ({"a": 1}, {"a": True}, False),  # JSON's 1 and true differ, though Python's do not
        ({"a": True}, {"a": True}, True),
        ({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]}, False),  # objects in a list: whole
        ({"a": [{"x": 1}, [True]]}, {"a": [{"x": 1}, [True]]}, True),
        ({"a": [1]}, {"a": [True]}, False),
        ([1, 2], [1, 2], True),
        ("text", {"a": 1}, False),
        (1.0, 1, True),
        (1, [1], False),
        ([1], 1, False),
        ({"a": 1}, [1], False),
    ],
)
def test_contains(actual: Any, wanted: Any, expected: bool) -> None:
    assert contains(actual, wanted) is expected
