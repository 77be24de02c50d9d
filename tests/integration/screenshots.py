"""``python -m tests.integration.screenshots``: the screenshots of docs/dashboard.md.

Builds a throwaway database on ``DATABASE_URL``'s server with the dashboard tests' data (a
day of jobs of three kinds, retries and failures, a schedule's history, a worker and two
schedulers, a few pending jobs), serves the
dashboard, and saves what Chromium shows of a few pages at 390 px and 1440 px wide as PNG
files under docs/img/ (the first screen of each page only, to keep them small).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from playwright.sync_api import sync_playwright

from pgbeat.db.migrate import apply_migrations
from tests.helpers import temporary_database
from tests.integration.ui_support import (
    ADMIN_TOKEN,
    CHROMIUM,
    CHROMIUM_ARGS,
    REPO_ROOT,
    activity_dashboard,
    sync_schedules,
    write_schedules,
)

PAGES = [
    ("overview", "/"),
    ("schedules", "/schedules"),
    ("performance", "/performance?window=24h"),
    ("processes", "/processes"),
]
# A few jobs waiting, due now and later, beside the finished ones of seed_activity.
PENDING = """
INSERT INTO jobs (kind, payload, run_at)
SELECT (ARRAY['send_email', 'sync_crm'])[1 + i % 2], jsonb_build_object('n', i),
       now() + (i - 3) * interval '40 s'
FROM generate_series(1, 7) AS i
"""
WIDTHS = {"phone": (390, 844), "desktop": (1440, 800)}


def take(server_url: str, output: Path) -> list[Path]:
    """Every page of PAGES at every width of WIDTHS, as output/dashboard-<page>-<width>.png."""
    with seeded_site(server_url) as (site, url):
        return _shoot(site, url, output)


@contextmanager
def seeded_site(server_url: str) -> Iterator[tuple[str, str]]:
    """(the dashboard's address, its database's URL): a throwaway database with the data of
    the dashboard tests, served with the admin and viewer tokens until the block ends."""
    with temporary_database(server_url, prefix="pgbeat_shots") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)
            conn.execute(PENDING)
        with tempfile.TemporaryDirectory() as folder:
            schedules = write_schedules(Path(folder))
            sync_schedules(url, schedules)
            with activity_dashboard(url) as ui:
                yield ui.url, url


def _shoot(site: str, url: str, output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    saved = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for width, (w, h) in WIDTHS.items():
            context = browser.new_context(viewport={"width": w, "height": h})
            page = context.new_page()
            page.goto(site + "/login")
            page.get_by_label("Token").fill(ADMIN_TOKEN)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(site + "/")
            for name, path in PAGES:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("UPDATE pgbeat_processes SET heartbeat_at = now()")
                page.goto(site + path)
                target = output / f"dashboard-{name}-{width}.png"
                page.screenshot(path=str(target))
                saved.append(target)
            context.close()
        browser.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.screenshots")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    server = os.environ.get("DATABASE_URL")
    if not server:
        print("DATABASE_URL is not set: the screenshots need a PostgreSQL server", file=sys.stderr)
        return 1
    for path in take(server, args.output):
        print(
            f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}"
            f" ({path.stat().st_size // 1024} KB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
