"""The hour-long soak's command, run for a few seconds: it samples, writes its CSVs and plot."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_few_seconds_of_the_soak_write_samples_and_a_plot(
    server_url: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "bench.soak_hour", "--minutes", "0.1", "--sample-seconds", "2",
            "--rate", "200", "--schedules", "2", "--processes", "1", "--name", "smoke",
            "--output-dir", str(tmp_path), "--database-url", server_url,
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "smoke.csv").open() as samples:
        rows = list(csv.DictReader(samples))
    assert len(rows) >= 2
    assert {"heap_mb", "index_mb", "lag_p99_ms", "rss_worker_1_mb", "rss_scheduler_mb"} <= set(
        rows[0]
    )
    assert sum(float(r["jobs_per_s"]) for r in rows) > 0
    assert (tmp_path / "smoke.png").stat().st_size > 10_000
    with (tmp_path / "smoke-dashboard.csv").open() as pages:
        assert {"/", "/jobs", "/schedules/soak_0"} <= {r["page"] for r in csv.DictReader(pages)}
    assert "reference minute" in done.stdout
    assert "dashboard at the end: slowest page" in done.stdout
