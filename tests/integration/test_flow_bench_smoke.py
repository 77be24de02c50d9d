"""``python -m bench.flow_bench`` end to end at a tiny size: every row it reports is there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_bench


@pytest.mark.slow
def test_flow_bench_measures_each_row(server_url: str, tmp_path: Path) -> None:
    output = tmp_path / "flow.json"
    command = ["bench.flow_bench", "--only", "keys,priority,plan"]
    command += ["--jobs", "300", "--repeat", "1", "--backlog", "2000", "--plan-rows", "5000"]
    done = run_bench(server_url, *command, "--output", str(output), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(output.read_text())
    assert report["key_concurrency_drain"]["key_concurrency_1_jobs_per_s"] > 0
    assert report["priority_wait_ms"]["samples"] > 0
    assert report["claim_plan"]["sort"] is False
    assert any("jobs_claim_order" in line for line in report["claim_plan"]["plan"])
