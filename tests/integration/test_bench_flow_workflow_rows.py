"""``python -m bench --smoke --only pgbeat_workflows,pgbeat_flow``: issue 36's workflow rows
and issue 34's shape and fairness rows, end to end at their smoke sizes, in the printed
table, the JSON and the targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_bench


@pytest.mark.slow
def test_the_workflow_shape_and_fairness_rows_are_in_one_run(
    server_url: str, tmp_path: Path
) -> None:
    output = tmp_path / "rows.json"
    only = ["--only", "pgbeat_workflows,pgbeat_flow"]
    done = run_bench(server_url, "bench", "--smoke", *only, "--output", str(output), timeout=400)

    assert done.returncode == 0, done.stderr[-2000:]
    for title in ("Workflows: enqueue_workflow", "A drain beside", "Key B's start"):
        assert title in done.stdout
    document = json.loads(output.read_text())
    assert document["skipped"] == []
    rows = {(r["system"], r["measurement"], r["variant"]): r for r in document["results"]}
    assert set(rows) == {
        ("pgbeat_workflows", "workflow", "enqueue"),
        ("pgbeat_workflows", "workflow", "fan_out_drain"),
        ("pgbeat_workflows", "workflow", "fan_in_advance"),
        ("pgbeat_flow", "beside_shapes", "limited_empty_20"),
        ("pgbeat_flow", "fairness", "empty"),
        ("pgbeat_flow", "fairness", "not_fair"),
        ("pgbeat_flow", "fairness", "fair"),
        ("pgbeat_flow", "fairness", "empty_one_worker"),
        ("pgbeat_flow", "fairness", "fair_one_worker"),
    }
    assert rows["pgbeat_workflows", "workflow", "enqueue"]["detail"]["steps"] == 102
    assert rows["pgbeat_workflows", "workflow", "fan_out_drain"]["ratio"] > 0
    assert rows["pgbeat_workflows", "workflow", "fan_in_advance"]["value"] >= 0
    shape = rows["pgbeat_flow", "beside_shapes", "limited_empty_20"]
    assert shape["value"] > 0 and shape["ratio"] > 0 and shape["detail"]["alone_jobs_per_s"] > 0
    runs: tuple[tuple[str, int, int], ...] = (("empty", 0, 4), ("not_fair", 300, 4))
    runs += (("fair", 300, 4), ("empty_one_worker", 0, 1), ("fair_one_worker", 300, 1))
    for mode, backlog, processes in runs:  # issue 34's shape: 4 processes x 50 slots
        fairness = rows["pgbeat_flow", "fairness", mode]["detail"]
        assert fairness["backlog"] == backlog and fairness["processes"] == processes
        assert fairness["samples"] == 10
        assert 0 < fairness["p50_ms"] <= fairness["p99_ms"]
    targets = {t["target"]: t for t in document["targets"]}
    # measured at 100 children, so the 10,000-step targets say n/a rather than a verdict
    assert targets["enqueue_workflow 1+10,000+1 < 1 s"]["met"] is None
    assert targets["drain beside every shape >= 0.9x alone"]["measured"] == shape["ratio"]
    assert targets["fair, 4 x 50: B's p99 <= 2x its p99 alone"]["measured"] is not None
