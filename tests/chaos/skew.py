"""Scenario 4: a scheduler whose own clock is wrong (libfaketime) still enqueues on time.

Time comes from the database, so a replica seven minutes ahead or behind must enqueue
nothing before it is due and nothing late. The scenario measures both, per offset, from the
jobs table: a period is early when its job was created before its fire time (``created_at``
and ``run_at`` are both the database's clock), late when it was created more than
``LATE_AFTER`` after it, among the periods enqueued after the replica's first tick.
"""

from __future__ import annotations

import glob
import shutil
import sys
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from pgbeat.scheduling.file import parse_schedules
from tests.chaos.harness import ROOT, ScenarioResult, audit_periods, connect, poll_until, scalar
from tests.helpers import CliProcess, cli_env

SCHEDULES = '[schedules.tick]\nevery = "1s"\n\n[schedules.minutely]\ncron = "* * * * *"\n'
LATE_AFTER = timedelta(seconds=1)

# One-second periods enqueued after the replica's first tick (the ones lateness is read on).
TICKS = """
SELECT count(*) FROM jobs
WHERE unique_key LIKE 'tick@%%' AND created_at > (SELECT min(created_at) FROM jobs)"""
# Periods created before they were due, by the database clock.
EARLY = "SELECT count(*) FROM jobs WHERE unique_key LIKE %s AND created_at < run_at"
# Periods enqueued after the replica's first tick (which may catch up a period missed
# before it started), how many came late and how late the latest one came. A replica that
# trusted a clock 7 minutes behind would enqueue each period 7 minutes late.
DUE_WHILE_RUNNING = """
SELECT count(*) FILTER (WHERE created_at - run_at > %(late)s),
       coalesce(extract(epoch FROM max(created_at - run_at)), 0)
FROM jobs
WHERE unique_key LIKE %(key)s AND created_at > (SELECT min(created_at) FROM jobs)"""


def faketime_library() -> str | None:
    """Debian's libfaketime (package faketime), in its thread-safe build; None if absent."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    found += sorted(glob.glob("/usr/lib/faketime/libfaketimeMT.so.1"))
    return found[0] if found and shutil.which("faketime") else None


@dataclass(frozen=True)
class ClockSkew:
    offsets: tuple[str, ...] = ("+7m", "-7m")
    ticks: int = 5  # one-second periods to see enqueued after the first tick, per offset
    timeout: float = 60.0


def clock_skew(url: str, p: ClockSkew, workdir: Path) -> ScenarioResult:
    """Run one scheduler under each offset in turn, on a database emptied between them."""
    result = ScenarioResult("clock skew", asdict(p))
    library = faketime_library()
    if library is None:
        result.figures["recovery"] = "skipped: needs Debian's faketime"
        result.check(False, "faketime is not installed")
        return result
    path = workdir / "skew-schedules.toml"
    path.write_text(SCHEDULES)
    schedules = parse_schedules(SCHEDULES)
    tick = next(s for s in schedules if s.name == "tick")
    measured: dict[str, dict[str, float]] = {}
    audits = {}
    with connect(url) as conn:
        for offset in p.offsets:
            conn.execute("TRUNCATE jobs, pgbeat_schedule_history")
            # The library preloaded into pgbeat itself, not the faketime wrapper, which does
            # not pass SIGTERM on: the scheduler must be the process the signal reaches.
            env = cli_env(
                url, LD_PRELOAD=library, FAKETIME=offset, FAKETIME_DONT_FAKE_MONOTONIC="1"
            )
            scheduler = CliProcess(
                [sys.executable, "-m", "pgbeat", "scheduler", "--schedules", str(path),
                 "--log-level", "WARNING"],
                env,
                str(ROOT),
            )  # fmt: skip
            try:
                enqueued = poll_until(lambda: scalar(conn, TICKS) >= p.ticks, p.timeout)
            finally:
                output = scheduler.stop()
            result.check(enqueued, f"{offset}: fewer than {p.ticks} ticks in {p.timeout:g}s")
            result.check("Traceback" not in output, f"{offset}: traceback:\n{output[-2000:]}")
            result.check(scheduler.returncode == 0, f"{offset}: exit {scheduler.returncode}")
            early = scalar(conn, EARLY, ("%@%",))
            late, worst = conn.execute(
                DUE_WHILE_RUNNING, {"late": LATE_AFTER, "key": "tick@%"}
            ).fetchone() or (0, 0.0)
            measured[offset] = {
                "after_first_tick": scalar(conn, TICKS),
                "early": early,
                "late": late,
                "max_lag_s": round(float(worst), 4),
            }
            audits[f"tick {offset}"] = audit_periods(conn, tick)
    early_total = sum(m["early"] for m in measured.values())
    late_total = sum(m["late"] for m in measured.values())
    worst_lag = max((m["max_lag_s"] for m in measured.values()), default=0.0)
    result.figures.update(
        offsets=measured,
        periods={name: audit.summary() for name, audit in audits.items()},
        load="1 scheduler under faketime, a 1 s and a 1 min schedule",
        faults=f"replica clock {' and '.join(p.offsets)}",
        recovery=f"{early_total} periods early, {late_total} late (> 1 s); "
        f"the latest {worst_lag * 1000:.0f} ms after its fire time",
    )
    result.check(early_total == 0, f"periods enqueued before they were due: {measured}")
    result.check(late_total == 0, f"periods enqueued more than 1 s late: {measured}")
    for name, audit in audits.items():
        result.check(audit.duplicates == 0, f"{name}: {audit.duplicates} duplicate periods")
        result.check(not audit.missing, f"{name}: missing periods {audit.missing[:5]}")
    return result
