"""``python -m bench.flow_bench`` end to end at a tiny size: every row it reports is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_flow_bench_measures_each_row(server_url: str, tmp_path: Path) -> None:
    output = tmp_path / "flow.json"
    env = {**os.environ, "DATABASE_URL": server_url, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "bench.flow_bench", "--only", "keys,priority,plan"]
    command += ["--jobs", "300", "--repeat", "1", "--backlog", "2000", "--plan-rows", "5000"]
    done = subprocess.run(
        [*command, "--output", str(output)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(output.read_text())
    assert report["key_concurrency_drain"]["key_concurrency_1_jobs_per_s"] > 0
    assert report["priority_wait_ms"]["samples"] > 0
    assert report["claim_plan"]["sort"] is False
    assert any("jobs_claim_order" in line for line in report["claim_plan"]["plan"])
