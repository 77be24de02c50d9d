"""The workflow, shape and fairness rows of ``python -m bench`` in the report: their ratio
column, their targets, their table lines, and which runs include those systems."""

from __future__ import annotations

from typing import Any

import pytest
from bench import report
from bench.__main__ import chosen_systems, parse_arguments, system_flags
from bench.runner import SYSTEMS


def result(measurement: str, variant: str, value: float, **detail: Any) -> dict[str, Any]:
    system = {"workflow": "pgbeat_workflows"}.get(measurement, "pgbeat_flow")
    unit = {"fairness": "ms p50", "workflow": "s"}.get(measurement, "jobs/s")
    return {
        "system": system,
        "measurement": measurement,
        "variant": variant,
        "value": value,
        "unit": unit,
        "config": "c",
        "detail": detail,
    }


def workflow_rows(children: int, enqueue_s: float, ratio: float, advance_ms: float) -> list[Any]:
    return [
        result("workflow", "enqueue", enqueue_s, children=children),
        result("workflow", "fan_out_drain", 5000.0, children=children, ratio=ratio),
        result("workflow", "fan_in_advance", advance_ms, children=children),
    ]


def fairness_rows(empty_p99: float, fair_p99: float) -> list[Any]:
    return [
        result("fairness", "empty", 20.0, p50_ms=20.0, p99_ms=empty_p99),
        result("fairness", "not_fair", 9000.0, p50_ms=9000.0, p99_ms=9500.0),
        result("fairness", "fair", 30.0, p50_ms=30.0, p99_ms=fair_p99),
    ]


def verdicts(results: list[Any]) -> dict[str, tuple[Any, Any]]:
    return {t["target"]: (t["measured"], t["met"]) for t in report.round_four_targets(results)}


def test_a_row_without_a_raw_baseline_shows_the_ratio_its_system_measured() -> None:
    rows = report.with_ratios(
        [result("beside_shapes", "all", 800.0, ratio=0.42), result("workflow", "enqueue", 0.4)]
    )
    assert [r["ratio"] for r in rows] == [0.42, None]


def test_a_row_with_a_raw_baseline_keeps_the_ratio_to_it() -> None:
    raw = {**result("drain", "batched", 1000.0, ratio=9.9), "system": "raw_sql"}
    mine = {**result("drain", "x", 500.0, ratio=9.9), "system": "pgbeat"}
    assert [r["ratio"] for r in report.with_ratios([raw, mine])] == [1.0, 0.5]


@pytest.mark.parametrize(
    ("enqueue_s", "ratio", "advance_ms", "met"),
    [
        (0.4, 0.85, 3.0, (True, True, True)),
        (1.2, 0.42, 150.0, (False, False, False)),
        (0.99, 0.8, 99.9, (True, True, True)),  # the limits: < 1 s, >= 0.8x, < 100 ms
        (1.0, 0.79, 100.0, (False, False, False)),
    ],
)
def test_the_workflow_targets_at_10000_children(
    enqueue_s: float, ratio: float, advance_ms: float, met: tuple[bool, bool, bool]
) -> None:
    found = verdicts(workflow_rows(10_000, enqueue_s, ratio, advance_ms))
    assert found == {
        "enqueue_workflow 1+10,000+1 < 1 s": (enqueue_s, met[0]),
        "fan-out drain >= 0.8x independent jobs": (ratio, met[1]),
        "10,000 -> 1 fan-in advance < 100 ms": (advance_ms, met[2]),
    }


def test_the_workflow_targets_are_not_judged_at_another_size() -> None:
    found = verdicts(workflow_rows(100, 5.0, 0.1, 500.0))
    assert set(found.values()) == {(None, None)}
    assert len(found) == 3


def test_the_shapes_target_takes_the_worst_shape() -> None:
    shapes = [result("beside_shapes", name, 1.0, ratio=r) for name, r in (("a", 0.95), ("b", 0.4))]
    assert verdicts(shapes) == {"drain beside every shape >= 0.9x alone": (0.4, False)}
    good = [result("beside_shapes", "a", 1.0, ratio=0.9)]
    assert verdicts(good) == {"drain beside every shape >= 0.9x alone": (0.9, True)}


@pytest.mark.parametrize(("fair_p99", "ratio", "met"), [(60.0, 1.2, True), (100.0, 2.0, False)])
def test_the_fairness_target_compares_fair_p99_with_the_empty_queues(
    fair_p99: float, ratio: float, met: bool
) -> None:
    found = verdicts(fairness_rows(50.0, fair_p99))
    assert found == {"fair, 4 x 50: B's p99 <= 2x its p99 alone": (ratio, met)}


def test_no_rows_no_targets_of_theirs() -> None:
    assert report.round_four_targets([]) == []
    names = {t["target"] for t in report.targets([])}
    assert not any("workflow" in n or "shape" in n or "fair" in n for n in names)


def test_the_table_prints_each_section_with_fairness_as_p50_and_p99() -> None:
    rows = workflow_rows(10_000, 0.4, 0.85, 3.0) + fairness_rows(50.0, 60.0)
    rows.append(result("beside_shapes", "foreign_kind", 800.0, ratio=0.42, jobs=20_000))
    text = report.table(rows, [])
    assert "Workflows: enqueue_workflow" in text
    assert "A drain beside what the worker cannot take (issue 34's shapes) (20,000 jobs)" in text
    assert "30.00/60.00 ms p50/99" in text
    shape_line = next(line for line in text.splitlines() if "foreign_kind" in line)
    assert "0.42" in shape_line
    assert "met      fair, 4 x 50: B's p99 <= 2x its p99 alone" in text


def keys(argv: list[str]) -> set[str]:
    return {s.key for s in chosen_systems(parse_arguments(argv))}


def test_smoke_runs_the_rows_only_when_named() -> None:
    assert not keys(["--smoke"]) & {"pgbeat_workflows", "pgbeat_flow"}
    assert keys(["--smoke", "--only", "pgbeat_flow"]) == {"pgbeat_flow"}
    assert {"pgbeat_workflows", "pgbeat_flow"} <= keys(["--quick"])
    assert {"pgbeat_workflows", "pgbeat_flow"} <= keys(["--no-peers"])
    assert not keys(["--footprint-only"]) & {"pgbeat_workflows", "pgbeat_flow"}


@pytest.mark.parametrize(
    ("mode", "children", "shapes", "backlog", "samples"),
    [
        ([], "10000", "limited_empty_20,limited_empty_200,delayed_queues,key_rate_waiting,"
         "foreign_kind,all", "20000", "200"),
        (["--quick"], "10000", None, "5000", "100"),
        (["--smoke"], "100", "limited_empty_20", "300", "10"),
    ],
)  # fmt: skip
def test_each_profile_gives_the_rows_their_sizes(
    mode: list[str], children: str, shapes: str | None, backlog: str, samples: str
) -> None:
    args = parse_arguments(mode)
    by_key = {s.key: s for s in SYSTEMS}
    assert system_flags(by_key["pgbeat_workflows"], args) == ["--children", children]
    flags = system_flags(by_key["pgbeat_flow"], args)
    assert flags[2:] == ["--fair-backlog", backlog, "--fair-samples", samples]
    assert flags[0] == "--shapes" and (shapes is None or flags[1] == shapes)
    assert system_flags(by_key["raw_sql"], args) == []
    assert parse_arguments([*mode, "--workflow-children", "7"]).workflow_children == 7
