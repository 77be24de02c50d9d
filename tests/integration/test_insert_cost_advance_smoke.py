"""``python -m bench.insert_cost``, ``bench.workflow_advance`` and
``bench.workflow_statements`` end to end at a tiny size: every row they report is there, so
a changed statement or fixture breaks here rather than in a long run."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO_ROOT, run_bench
from tests.pgbouncer import unavailable_reason


@pytest.mark.slow
def test_insert_cost_compares_a_schema_with_itself(server_url: str) -> None:
    src = str(REPO_ROOT / "src")
    args = ["--base-src", src, "--rows", "50", "--statements", "2", "--rounds", "2"]
    args += ["--variant", "no_names:ALTER TABLE jobs DISABLE TRIGGER pgbeat_job_names"]
    done = run_bench(server_url, "bench.insert_cost", *args, timeout=180)

    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["added_since_base"] == []  # the same revision on both sides
    assert set(report["variants"]) == {"base", "this", "this with no_names"}
    base, this = report["variants"]["base"], report["variants"]["this"]
    # the same schema writes the same WAL records and touches the same buffers per row
    assert (base["wal_records"], base["buffers"]) == (this["wal_records"], this["buffers"])
    assert base["wal_records"] >= 2  # the heap row and at least its primary key
    assert all(v["us_per_row"] > 0 for v in report["variants"].values())


@pytest.mark.slow
def test_workflow_advance_measures_each_connection(server_url: str) -> None:
    reason = unavailable_reason(server_url)
    if reason is not None:
        pytest.skip(reason)
    args = ["--samples", "3", "--rounds", "1", "--poll", "0.2"]
    done = run_bench(server_url, "bench.workflow_advance", *args, timeout=180)

    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    advance = report["advance"]
    assert set(advance) == {"direct", "pgbouncer, LISTEN direct", "pgbouncer, poll"}
    for row in advance.values():
        assert row["samples"] == 3
        assert 0 <= row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert advance["pgbouncer, poll"]["max_ms"] < 5_000  # within a few polls of 0.2 s


@pytest.mark.slow
def test_workflow_statements_reports_each_side(server_url: str) -> None:
    args = ["--children", "1000", "--batch", "100", "--rounds", "1"]
    done = run_bench(server_url, "bench.workflow_statements", *args, timeout=180)

    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    for row in ("complete", "claim"):
        assert set(report[row]) == {"children", "independent"}
        for side in report[row].values():
            assert side["statements"] >= 3
            assert 0 < side["p25_ms"] <= side["median_ms"] <= side["p75_ms"]
    assert [len(v) for v in report["root_end"].values()] == [1, 1]
