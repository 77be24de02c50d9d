"""The results as a table with ratios to the raw-SQL baselines, the targets, and the JSON file."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.measure import (
    DEAD,
    DRAIN,
    ENQUEUE_BULK,
    ENQUEUE_SINGLE,
    FAIRNESS,
    PICKUP,
    SHAPES,
    SIZE,
    TICK,
    WAL,
    WORKFLOW,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"

Row = dict[str, Any]

# Which raw-SQL result each throughput measurement is divided by.
BASELINES = {
    ENQUEUE_SINGLE: "insert",
    ENQUEUE_BULK: "copy",
    DRAIN: "batched",
}
TITLES = {
    ENQUEUE_SINGLE: "Enqueue, one job per transaction",
    ENQUEUE_BULK: "Bulk enqueue",
    DRAIN: "Drain of no-op jobs",
    PICKUP: "Idle pickup latency (enqueue call -> handler start)",
    TICK: "pgbeat scheduler tick",
    WAL: "WAL per job, bulk enqueue + claim + complete (value: total; enqueue/drain in config)",
    DEAD: "Dead tuples left after the drain, per job (autovacuum off)",
    SIZE: "Tables + indexes after the drain, per million jobs (heap/index in config)",
    WORKFLOW: "Workflows: enqueue_workflow, the fan-out's drain, the fan-in's advance",
    SHAPES: "A drain beside what the worker cannot take (issue 34's shapes)",
    FAIRNESS: "Key B's start beside key A's backlog (p50/p99)",
}


def baseline(results: Sequence[Row], measurement: str) -> float | None:
    """The raw-SQL value the ``measurement``'s ratios are taken against."""
    variant = BASELINES.get(measurement)
    for row in results:
        key = (row["system"], row["measurement"], row["variant"])
        if key == ("raw_sql", measurement, variant):
            return float(row["value"])
    return None


def with_ratios(results: Sequence[Row]) -> list[Row]:
    """Each result with ``ratio`` to its baseline, or the ratio its system measured itself
    (``detail["ratio"]``: a paired comparison of its own), else ``None``."""
    rows = []
    for row in results:
        base = baseline(results, row["measurement"])
        ratio = round(row["value"] / base, 3) if base else row["detail"].get("ratio")
        rows.append({**row, "ratio": ratio})
    return rows


def processes(row: Row) -> int:
    """How many OS processes a result's system ran in (1 unless its detail says more)."""
    return int(row["detail"].get("processes", 1))


def best(
    results: Sequence[Row],
    measurement: str,
    system_prefix: str,
    *,
    one_process: bool = False,
) -> Row | None:
    """The best result of the systems named ``system_prefix...`` (highest rate, lowest ms).

    Every configuration counts, multi-process drains included, unless ``one_process``.
    """
    rows = [
        r
        for r in results
        if r["measurement"] == measurement
        and r["system"].startswith(system_prefix)
        and not (one_process and processes(r) > 1)
    ]
    if not rows:
        return None
    if measurement == PICKUP:
        return min(rows, key=lambda r: r["value"])
    return max(rows, key=lambda r: r["value"])


def targets(results: Sequence[Row]) -> list[Row]:
    """pgbeat's performance targets, each with what was measured and whether it is met."""
    drain = best(results, DRAIN, "pgbeat")
    pgqueuer = best(results, DRAIN, "pgqueuer")
    drain_1 = best(results, DRAIN, "pgbeat", one_process=True)
    pgqueuer_1 = best(results, DRAIN, "pgqueuer", one_process=True)
    raw_drain = baseline(results, DRAIN)
    bulk = best(results, ENQUEUE_BULK, "pgbeat")
    single = best(results, ENQUEUE_SINGLE, "pgbeat")
    raw_single = baseline(results, ENQUEUE_SINGLE)
    pickup = best(results, PICKUP, "pgbeat")
    checks = [
        ("drain >= 3x pgqueuer's best", _ratio(drain, pgqueuer), 3.0, "x"),
        ("drain >= 3x pgqueuer's best, 1 process each", _ratio(drain_1, pgqueuer_1), 3.0, "x"),
        ("drain >= 50% of the raw batched loop", _ratio(drain, raw_drain), 0.5, "x"),
        ("drain >= 1.0x the raw batched loop, paired, 1 process", _paired(drain_1), 1.0, "x"),
        ("bulk enqueue >= 50,000 jobs/s", bulk["value"] if bulk else None, 50_000.0, "jobs/s"),
        ("single enqueue >= 80% of raw INSERT", _ratio(single, raw_single), 0.8, "x"),
        ("single enqueue >= 80% of raw INSERT, paired", _paired(single), 0.8, "x"),
    ]
    rows = [_check(name, measured, floor, unit) for name, measured, floor, unit in checks]
    latency = pickup["detail"] if pickup else {}
    rows.append(_check("pickup p50 < 10 ms", latency.get("p50_ms"), 10.0, "ms", below=True))
    rows.append(_check("pickup p99 < 50 ms", latency.get("p99_ms"), 50.0, "ms", below=True))
    return rows + round_four_targets(results)


def _row(results: Sequence[Row], measurement: str, variant: str) -> Row | None:
    return next(
        (r for r in results if (r["measurement"], r["variant"]) == (measurement, variant)), None
    )


def round_four_targets(results: Sequence[Row]) -> list[Row]:
    """Issue 36's workflow targets (at 10,000 children, else n/a) and issue 34's shapes and
    fairness targets, where those rows ran."""
    rows: list[Row] = []
    enqueued = _row(results, WORKFLOW, "enqueue")
    if enqueued is not None:
        full = enqueued["detail"].get("children") == 10_000
        fan_out = _row(results, WORKFLOW, "fan_out_drain")
        fan_in = _row(results, WORKFLOW, "fan_in_advance")
        checks = [
            ("enqueue_workflow 1+10,000+1 < 1 s", enqueued["value"], 1.0, "s", True),
            ("fan-out drain >= 0.8x independent jobs", fan_out and fan_out["detail"]["ratio"],
             0.8, "x", False),
            ("10,000 -> 1 fan-in advance < 100 ms", fan_in and fan_in["value"], 100.0, "ms",
             True),
        ]  # fmt: skip
        for name, measured, limit, unit, below in checks:
            rows.append(_check(name, measured if full else None, limit, unit, below=below))
    shapes = [r for r in results if r["measurement"] == SHAPES]
    if shapes:
        worst = min(float(r["detail"]["ratio"]) for r in shapes)
        rows.append(_check("drain beside every shape >= 0.9x alone", worst, 0.9, "x"))
    empty, fair = _row(results, FAIRNESS, "empty"), _row(results, FAIRNESS, "fair")
    if empty is not None and fair is not None and empty["detail"]["p99_ms"]:
        ratio = round(fair["detail"]["p99_ms"] / empty["detail"]["p99_ms"], 2)
        rows.append(
            _check("fair, 4 x 50: B's p99 <= 2x its p99 alone", ratio, 2.0, "x", below=True)
        )
    return rows


def best_drains(results: Sequence[Row]) -> list[Row]:
    """Each system's best drain, over all its configurations and in one process."""
    rows = []
    for system in dict.fromkeys(r["system"] for r in results if r["measurement"] == DRAIN):
        overall = best(results, DRAIN, system)
        single = best(results, DRAIN, system, one_process=True)
        rows.append(
            {
                "system": system,
                "best": overall and _summary(overall),
                "best_1_process": single and _summary(single),
            }
        )
    return rows


def _summary(row: Row) -> Row:
    return {"variant": row["variant"], "value": row["value"], "processes": processes(row)}


def _ratio(row: Row | None, other: Row | float | None) -> float | None:
    base = other["value"] if isinstance(other, dict) else other
    if row is None or not base:
        return None
    return round(float(row["value"]) / float(base), 3)


def _paired(single: Row | None) -> float | None:
    return None if single is None else single["detail"].get("paired_ratio")


def _check(
    name: str, measured: float | None, limit: float, unit: str, *, below: bool = False
) -> Row:
    met = None if measured is None else (measured < limit if below else measured >= limit)
    return {"target": name, "measured": measured, "unit": unit, "met": met}


def table(results: Sequence[Row], skipped: Sequence[Row]) -> str:
    """The human-readable report: one section per measurement, then the targets."""
    rows = with_ratios(results)
    lines: list[str] = []
    for measurement, title in TITLES.items():
        section = [r for r in rows if r["measurement"] == measurement]
        if section:
            lines += ["", _heading(measurement, title, section), *_section(section)]
    lines += _best_drains_section(results)
    lines += ["", "pgbeat targets"]
    for check in targets(results):
        verdict = {True: "met", False: "NOT MET", None: "n/a"}[check["met"]]
        measured = _number(check["measured"], check["unit"])
        lines.append(f"  {verdict:8} {check['target']:46} measured {measured} {check['unit']}")
    for skip in skipped:
        lines.append(f"\nskipped {skip['system']}: {skip['reason']}")
    return "\n".join(lines)


def _best_drains_section(results: Sequence[Row]) -> list[str]:
    rows = best_drains(results)
    if not rows:
        return []
    raw = baseline(results, DRAIN)
    lines = ["", "Best drain of each system (any number of processes / 1 process)"]
    for row in rows:
        cells = [_best_cell(row["best"], raw), _best_cell(row["best_1_process"], raw)]
        lines.append(f"  {row['system']:18} {cells[0]:42} {cells[1]}")
    return lines


def _best_cell(summary: Row | None, raw: float | None) -> str:
    if summary is None:
        return "-"
    ratio = f" ({summary['value'] / raw:.2f}x)" if raw else ""
    return f"{summary['variant']} {summary['value']:,.0f} jobs/s{ratio}"


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if unit == "jobs/s" else f"{value:,.2f}"


def _heading(measurement: str, title: str, section: Sequence[Row]) -> str:
    variant = BASELINES.get(measurement)
    # The raw batched drain runs more jobs than the others (its config says how many).
    others = [r for r in section if (r["system"], r["variant"]) != ("raw_sql", variant)]
    jobs = (others or section)[0]["detail"].get("jobs")
    size = f" ({jobs:,} jobs)" if jobs else ""
    against = f"; ratio = value / raw_sql {variant}" if variant else ""
    return f"{title}{size}{against}"


def _section(section: Sequence[Row]) -> list[str]:
    lines = [f"  {'system':18} {'variant':16} {'value':>12} {'unit':8} {'ratio':>6}  config"]
    for row in section:
        value = f"{row['value']:,.1f}" if row["unit"] == "jobs/s" else f"{row['value']:,.2f}"
        unit = row["unit"]
        if row["measurement"] in (PICKUP, FAIRNESS):
            value = f"{row['detail']['p50_ms']:.2f}/{row['detail']['p99_ms']:.2f}"
            unit = "ms p50/99"
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}"
        config = _footprint_config(row) or row["config"]
        lines.append(
            f"  {row['system']:18} {row['variant']:16} {value:>12} {unit:8} {ratio:>6}  {config}"
        )
    return lines


def _footprint_config(row: Row) -> str | None:
    """The split a footprint figure is made of, before how it was measured."""
    detail = row["detail"]
    if row["measurement"] == WAL:
        split = f"{detail['enqueue_bytes_per_job']:.0f}/{detail['drain_bytes_per_job']:.0f} B"
    elif row["measurement"] == SIZE:
        split = f"{detail['heap_mb_per_million']:.0f}/{detail['index_mb_per_million']:.0f} MB"
    elif row["measurement"] == DEAD:
        split = f"{detail['dead_tuples']} dead ({detail['counted_by']})"
    else:
        return None
    return f"{split}; {row['config']}"


def write_json(document: dict[str, Any], output: Path | None) -> Path:
    """Write the run to ``output`` or ``bench/results/<UTC timestamp>.json``; return the path."""
    if output is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        output = RESULTS_DIR / f"{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    rows = with_ratios(document["results"])
    full = {
        **document,
        "results": rows,
        "best_drains": best_drains(document["results"]),
        "targets": targets(document["results"]),
    }
    output.write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
    return output


def save_report(report: dict[str, Any], prefix: str, output: Path | None = None) -> Path:
    """Print a row module's report as JSON and keep it in ``output`` or
    ``bench/results/<prefix>-<its started_at>.json``; return the path."""
    text = json.dumps(report, indent=2)
    print(text)
    path = output or RESULTS_DIR / f"{prefix}-{report['started_at']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    print(f"written to {path}", file=sys.stderr)
    return path
