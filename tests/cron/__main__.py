"""``python -m tests.cron [--long]``: pgbeat's cron fire times against cronsim and a brute force.

Random Vixie expressions in 51 zones, started just before every 2020-2030 offset change
of each zone and at random instants; the next fire instants compared. Prints the cases
checked, the mismatches by kind, and every case where cronsim disagreed with the brute
force and pgbeat in one of its documented ways (docs/cron.md). Exit status 1 on any
mismatch. The default is the short run that ``pytest tests/cron`` also makes.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time

from tests.cron.harness import Finding, cases, compare_case
from tests.cron.zones import ZONES, transitions

SHORT = {"per_transition": 1, "random_starts": 3}
LONG = {"per_transition": 13, "random_starts": 40}  # 693 transitions: 11,049 cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cron", description=__doc__)
    parser.add_argument("--long", action="store_true", help="at least 10,000 cases")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--show", type=int, default=3, help="examples printed per kind")
    args = parser.parse_args(argv)
    size = LONG if args.long else SHORT
    started = time.monotonic()
    checked, findings = run(random.Random(args.seed), **size)
    report(checked, findings, args, time.monotonic() - started)
    return 1 if any(finding.is_mismatch for finding in findings) else 0


def run(rng: random.Random, per_transition: int, random_starts: int) -> tuple[int, list[Finding]]:
    checked, findings = 0, []
    for case in cases(rng, per_transition, random_starts):
        checked += 1
        findings.extend(compare_case(case))
    return checked, findings


def report(checked: int, findings: list[Finding], args: argparse.Namespace, took: float) -> None:
    changes = sum(len(transitions(zone)) for zone in ZONES)
    mismatches = [finding for finding in findings if finding.is_mismatch]
    known = [finding for finding in findings if not finding.is_mismatch]
    print(
        f"{checked} cases (expression x zone x start; seed {args.seed}): {len(ZONES)} zones, "
        f"{changes} offset changes in 2020-2030, {took:.0f} s"
    )
    cases_off = len({finding.case for finding in mismatches})
    print(f"cases with a mismatch: {cases_off} ({len(mismatches)} findings, by kind:)")
    _by_kind(mismatches, args.show)
    print(f"cases where cronsim deviates from Debian (crontab(5) sides with pgbeat): {len(known)}")
    _by_kind(known, args.show)


def _by_kind(findings: list[Finding], show: int) -> None:
    groups: dict[str, list[Finding]] = collections.defaultdict(list)
    for finding in findings:
        groups[finding.kind].append(finding)
    for kind, group in sorted(groups.items(), key=lambda item: -len(item[1])):
        print(f"  {kind}: {len(group)}")
        for finding in group[:show]:
            print("    " + str(finding).replace("\n", "\n    "))


if __name__ == "__main__":
    sys.exit(main())
