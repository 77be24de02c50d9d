"""The performance view: every kind's outcomes and timings over 1 h, 24 h or 7 d, sortable,
and one kind's charts over time.

Both pages read the newest ``SCAN_CAP`` jobs finished in the window (one range scan of the
finished-time index) and say when that cap cut the window short.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat.db.guarded import rows
from pgbeat.db.sql.jobs import dashboard as dashboard_sql
from pgbeat.ui import charts, jobs_data, performance
from pgbeat.ui.context import Ui


def routes(ui: Ui) -> list[BaseRoute]:
    pages = PerformancePages(ui)
    return [
        Route("/performance", pages.kinds, methods=["GET"], name="performance"),
        Route("/performance/{kind:path}", pages.kind, methods=["GET"], name="performance_kind"),
    ]


class PerformancePages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def kinds(self, request: Request) -> Response:
        params = request.query_params
        try:
            window = performance.window_of(params.get("window"))
            key, descending = performance.sort_of(params.get("sort"), params.get("order"))
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            found = rows(
                conn,
                dashboard_sql.JOBS_PERFORMANCE_BY_KIND,
                {"window": window.span, "cap": performance.SCAN_CAP},
            )
            throughput = _throughput(conn, window.name, now)
        scanned = int(found[0]["scanned"]) if found else 0
        return self.ui.render(
            request,
            "performance.html",
            nav="performance",
            now=now,
            window=window,
            windows=list(performance.WINDOWS),
            rows=performance.sorted_rows(performance.with_rates(found), key, descending),
            sort=key,
            descending=descending,
            columns=performance.COLUMNS,
            scanned=scanned,
            capped=scanned >= performance.SCAN_CAP,
            scanned_from=found[0]["scanned_from"] if found else None,
            percent=performance.percent_text,
            charts=throughput,
        )

    def kind(self, request: Request) -> Response:
        kind = request.path_params["kind"]
        try:
            window = performance.window_of(request.query_params.get("window"))
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            found = rows(
                conn,
                dashboard_sql.JOBS_PERFORMANCE_OF_KIND,
                {
                    "window": window.span,
                    "cap": performance.SCAN_CAP,
                    "kind": kind,
                    "bucket_s": window.bucket.total_seconds(),
                },
            )
        built = performance.kind_charts(found, window, now)
        return self.ui.render(
            request,
            "performance_kind.html",
            nav="performance",
            now=now,
            kind=kind,
            window=window,
            windows=list(performance.WINDOWS),
            charts=built,
            cap=performance.SCAN_CAP,
            total=sum(int(r["done"]) + int(r["failed"]) for r in found),
        )


def _throughput(conn: Any, window: str, now: datetime) -> list[charts.Chart]:
    """All kinds' jobs per minute (1 h) or per hour (24 h); 7 d would count millions of rows."""
    if window == "1h":
        return [performance.minute_chart(rows(conn, dashboard_sql.JOBS_FINISHED_PER_MINUTE), now)]
    if window == "24h":
        return [performance.hour_chart(rows(conn, dashboard_sql.JOBS_FINISHED_PER_HOUR), now)]
    return []
