"""The benchmark's smoke mode: ``python -m bench --smoke`` runs pgbeat and raw SQL end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_bench


@pytest.mark.slow
def test_smoke_run_measures_pgbeat_and_raw_sql(server_url: str, tmp_path: Path) -> None:
    output = tmp_path / "smoke.json"
    done = run_bench(server_url, "bench", "--smoke", "--output", str(output))

    assert done.returncode == 0, done.stderr[-2000:]
    assert "Drain of no-op jobs" in done.stdout
    assert "pgbeat targets" in done.stdout
    document = json.loads(output.read_text())
    assert document["skipped"] == []
    measured = {(r["system"], r["measurement"], r["variant"]) for r in document["results"]}
    assert {
        ("raw_sql", "enqueue_single", "insert"),
        ("raw_sql", "enqueue_bulk", "unnest"),
        ("raw_sql", "enqueue_bulk", "copy"),
        ("raw_sql", "drain", "batched"),
        ("raw_sql", "drain", "per_job"),
        ("pgbeat", "enqueue_single", "enqueue"),
        ("pgbeat", "enqueue_bulk", "enqueue_many"),
        ("pgbeat", "pickup_latency", "listen_notify"),
        ("pgbeat", "scheduler_tick", "100-new"),
        ("pgbeat", "scheduler_tick", "100-existing"),
    } <= measured
    assert any(key[:2] == ("pgbeat", "drain") for key in measured)
    drains = [r for r in document["results"] if r["measurement"] == "drain"]
    for result in drains:
        assert result["detail"]["kept"] == "median", result
        assert result["detail"]["runs"], result
    pgbeat_drain = next(r for r in drains if r["system"] == "pgbeat")
    assert pgbeat_drain["detail"]["processes"] >= 1
    if pgbeat_drain["detail"]["processes"] == 1:  # paired with a raw drain of as many jobs
        assert pgbeat_drain["detail"]["paired_raw_jobs_per_s"] > 0, pgbeat_drain
        assert pgbeat_drain["detail"]["paired_ratio"] > 0, pgbeat_drain
    assert {b["system"] for b in document["best_drains"]} >= {"raw_sql", "pgbeat"}
    for result in document["results"]:  # a drain may leave no dead tuple at all
        assert result["value"] > 0 or result["measurement"] == "dead_tuples_after_drain", result
        assert {"system", "measurement", "variant", "value", "unit", "config", "ratio"} <= set(
            result
        )
    pickup = next(r for r in document["results"] if r["measurement"] == "pickup_latency")
    assert {"p50_ms", "p99_ms"} <= set(pickup["detail"])
    assert {t["target"] for t in document["targets"]} >= {
        "bulk enqueue >= 50,000 jobs/s",
        "drain >= 3x pgqueuer's best",
        "drain >= 3x pgqueuer's best, 1 process each",
        "drain >= 1.0x the raw batched loop, paired, 1 process",
    }


@pytest.mark.slow
def test_the_partitions_bench_runs_its_statements_on_both_layouts(server_url: str) -> None:
    """At a tiny scale, so that a statement whose parameters changed breaks here, not in a
    20-million-row run."""
    args = ["--rows", "2000", "--pending", "300", "--claims", "2", "--repeat", "1"]
    done = run_bench(server_url, "bench.partitions", *args)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)
    assert [r["layout"] for r in document["results"]] == ["flat", "partitioned"]
    for result in document["results"]:
        assert result["claim"]["jobs"] == 200
        assert result["remove_oldest_day"]["rows"] > 0


@pytest.mark.slow
def test_the_cpu_split_reports_each_drain_by_thread_and_server(
    server_url: str, tmp_path: Path
) -> None:
    """``python -m bench.cpu_split`` at a tiny scale: the raw loop and both worker drains,
    each with its wall time and CPU per job, the worker's by thread (the figures are the
    bench's to read, not this test's)."""
    output = tmp_path / "split.json"
    done = run_bench(
        server_url, "bench.cpu_split", "--jobs", "600", "--rounds", "1", "--output", str(output)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    medians = json.loads(output.read_text())["median_per_job"]
    assert set(medians) == {"raw_batched", "pgbeat_c200", "pgbeat_c100"}
    for name, row in medians.items():
        assert row["wall_us"] > 0 and row["python_us"] > 0, (name, row)
    assert {"loop_us", "outcomes_us", "handlers_us"} <= set(medians["pgbeat_c200"])
