"""Handlers' return values as stored JSON: what fits, what is refused, and why."""

from __future__ import annotations

import math
from typing import Any

import pydantic
import pytest

from pgbeat.errors import ResultError
from pgbeat.worker.results import RESULT_LIMIT, encode_result


class Model(pydantic.BaseModel):
    name: str
    count: int


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        ({"a": 1}, '{"a":1}'),
        ([1, "é"], '[1,"é"]'),
        ("s", '"s"'),
        (True, "true"),
        (2.5, "2.5"),
        ({}, "{}"),
        (Model(name="x", count=2), '{"name":"x","count":2}'),
    ],
)
def test_json_data_and_models_are_encoded(value: Any, text: str | None) -> None:
    assert encode_result(value) == text


def test_the_limit_is_64_kib_of_utf8_json() -> None:
    fits = "x" * (RESULT_LIMIT - 2)  # the quotes make it exactly the limit
    assert encode_result(fits) is not None
    with pytest.raises(ResultError, match="65,537 bytes of JSON, more than the 64 KiB"):
        encode_result("x" * (RESULT_LIMIT - 1))
    with pytest.raises(ResultError, match="more than the 64 KiB"):
        encode_result("é" * (RESULT_LIMIT // 2))  # two bytes each in UTF-8


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({"x": object()}, "cannot be stored as JSON"),
        ({1, 2}, "cannot be stored as JSON"),
        (math.nan, "cannot be stored as JSON"),
        ("a\x00b", "NUL"),
        ("\udcff", "lone surrogate"),
    ],
)
def test_what_jsonb_cannot_hold_is_refused(value: Any, fragment: str) -> None:
    with pytest.raises(ResultError, match=fragment):
        encode_result(value)


def test_a_cycle_is_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ResultError, match="cannot be stored as JSON"):
        encode_result(cycle)
