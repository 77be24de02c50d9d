"""docs/workflows.md's Python examples (the schedule fan-out, "Coming from Celery"), each
run as written on a database of its own, with ``conn`` and ``drain`` given."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.testing import drain

PAGE = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_has_its_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_example_runs(index: int, conn: psycopg.Connection[Any]) -> None:
    namespace: dict[str, Any] = {"conn": conn, "drain": drain, "pgbeat": pgbeat}
    exec(compile(BLOCKS[index], f"{PAGE.name} block {index}", "exec"), namespace)
