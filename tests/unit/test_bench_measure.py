"""bench/measure.py's median of repeated runs keeps what each run was paired with."""

from __future__ import annotations

from bench.measure import DRAIN, Result, median_of


def _run(value: float, raw: float) -> Result:
    detail = {"jobs": 60_000, "paired_raw_jobs_per_s": raw, "paired_ratio": round(value / raw, 3)}
    return Result("pgbeat", DRAIN, "c200", value, "jobs/s", "config", detail)


def test_the_median_of_paired_runs_is_the_median_of_their_ratios() -> None:
    runs = [_run(60_000, 62_000), _run(66_000, 60_000), _run(70_000, 69_000)]
    kept = median_of(runs)
    assert kept.value == 66_000
    assert kept.detail["paired_ratios"] == [0.968, 1.1, 1.014]
    assert kept.detail["paired_ratio"] == 1.014  # not the first run's 0.968
    assert kept.detail["paired_raw_jobs_per_s"] == 62_000


def test_runs_without_a_pair_keep_no_paired_figures() -> None:
    runs = [Result("pgbeat", DRAIN, "c100-p2", v, "jobs/s", "c", {"jobs": 1}) for v in (1, 2, 3)]
    assert "paired_ratio" not in median_of(runs).detail
