"""``python -m tests.integration.axe_report``: axe-core's violations on every dashboard page,
counted by impact, at 390 px and 1440 px, as admin and as viewer, and the pages that
scroll sideways.

The test (test_ui_pages_browser.py) fails on any serious or critical one; this prints all
of them, minor and moderate included, for a before/after comparison of a change.
"""

from __future__ import annotations

import collections
import os
import sys
from typing import Any

import psycopg
from playwright.sync_api import sync_playwright

from tests.integration.screenshots import seeded_site
from tests.integration.ui_support import ADMIN_TOKEN, AXE, CHROMIUM, CHROMIUM_ARGS, VIEWER_TOKEN

PAGES = [
    "/",
    "/schedules",
    "/schedules/nightly_report",
    "/jobs",
    "/jobs?status=failed",
    "/jobs/{failed}",
    "/failures",
    "/performance?window=24h",
    "/processes",
]
RUN = """async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
  .map(v => [v.id, v.impact, v.nodes.length])"""


def report(server_url: str) -> dict[str, collections.Counter[str]]:
    """Violating nodes by impact, per role and width, over the login page and PAGES."""
    counts: dict[str, collections.Counter[str]] = {}
    with seeded_site(server_url) as (site, url), sync_playwright() as playwright:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT max(id) FROM jobs WHERE status = 'failed'").fetchone()
        failed = row[0] if row else 1
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for role, token in (("admin", ADMIN_TOKEN), ("viewer", VIEWER_TOKEN)):
            for width in (390, 1440):
                found: collections.Counter[str] = collections.Counter()
                context = browser.new_context(
                    viewport={"width": width, "height": 900}, bypass_csp=True
                )
                page = context.new_page()
                page.goto(site + "/login")
                page.add_script_tag(path=str(AXE))
                count(found, page.evaluate(RUN))
                page.get_by_label("Token").fill(token)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url(site + "/")
                for path in PAGES:
                    page.goto(site + path.format(failed=failed))
                    if page.evaluate("document.documentElement.scrollWidth > innerWidth"):
                        found["pages scrolling sideways"] += 1
                    page.add_script_tag(path=str(AXE))
                    count(found, page.evaluate(RUN))
                counts[f"{role} {width}px"] = found
                context.close()
        browser.close()
    return counts


def count(found: collections.Counter[str], violations: list[list[Any]]) -> None:
    for rule, impact, nodes in violations:
        found[f"{impact} {rule}"] += nodes
        found[str(impact)] += nodes


def main() -> int:
    server = os.environ.get("DATABASE_URL")
    if not server or not AXE.exists():
        print("needs DATABASE_URL and axe-core (npm ci --prefix tests/browser)", file=sys.stderr)
        return 1
    for label, found in report(server).items():
        kinds = ("critical", "serious", "moderate", "minor", "pages scrolling sideways")
        totals = ", ".join(f"{i} {found[i]}" for i in kinds)
        print(f"{label}: {totals}")
        for key, count in sorted(found.items()):
            if " " in key and not key.startswith("pages"):
                print(f"    {key}: {count} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
