"""``python -m bench.keys_bench`` with tiny amounts: it runs end to end and reports each figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_bench


@pytest.mark.slow
def test_keys_bench_runs_with_tiny_amounts(server_url: str, tmp_path: Path) -> None:
    output = tmp_path / "keys.json"
    tiny = ["--calls", "20", "--chunk", "10", "--bulk-jobs", "100", "--batch", "50"]
    tiny += ["--drain-jobs", "100", "--rounds", "1", "--output", str(output)]
    done = run_bench(server_url, "bench.keys_bench", *tiny)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(output.read_text())
    assert len(run["single_calls"]) == 6
    assert all(v["calls"] == 20 and v["p50_ms"] > 0 for v in run["single_calls"].values())
    assert set(run["enqueue_many_per_s"]) == {
        "unkeyed",
        "keyed inserts",
        "keyed replaces of pending jobs",
    }
    index = run["unkeyed_with_and_without_jobs_live_key"]
    assert index["with index"]["drain_per_s"]["median"] > 0
    assert index["without index"]["enqueue_per_s"]["median"] > 0
