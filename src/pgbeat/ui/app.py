"""``create_app``: the dashboard as an ASGI application, to serve or to mount.

Server-rendered pages (Starlette + Jinja2, autoescaped) and one small CSS and JS file
served by the app itself: no CDN, no build step, no web fonts. Every page works without
JavaScript; the script only adds live refresh and confirm prompts.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import jinja2
import psycopg
import psycopg_pool
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from pgbeat.db.sql import session as session_sql
from pgbeat.jobs.payloads import DEFAULT_MAX_ATTEMPTS
from pgbeat.ui import (
    charts,
    jobs_pages,
    pages,
    performance_pages,
    queue_pages,
    schedule_pages,
    workflow_pages,
)
from pgbeat.ui.context import Ui, asset_version, base, first, href
from pgbeat.ui.schedule_source import ScheduleCatalog
from pgbeat.ui.security import (
    COOKIE,
    SESSION_SECONDS,
    Keys,
    LoginThrottle,
    SecurityMiddleware,
    audit_text,
    token_role,
)
from pgbeat.ui.settings import UiSettings, normalize_prefix
from pgbeat.ui.store import PageReads, Store

log = logging.getLogger("pgbeat.ui")


def create_app(
    database_url: str | None = None, *, settings: UiSettings | None = None, **options: Any
) -> Starlette:
    """The dashboard for ``database_url`` (or ``settings``); options are ``UiSettings`` fields.

    Mount it in another ASGI app (``Mount("/pgbeat", app=create_app(url))``) or serve it
    with uvicorn, as ``pgbeat ui`` does. It opens its pool of at most two connections on
    startup and closes it on shutdown.
    """
    if settings is None:
        if database_url is None:
            raise TypeError("create_app needs a database_url or settings")
        options["prefix"] = normalize_prefix(options.get("prefix"))
        settings = UiSettings(database_url=database_url, **options)
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("pgbeat.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals["draw"] = charts  # templates draw charts with it
    environment.globals["default_max_attempts"] = DEFAULT_MAX_ATTEMPTS
    ui = Ui(
        settings=settings,
        keys=Keys(),
        throttle=LoginThrottle(),
        store=Store(settings),
        schedules=ScheduleCatalog(),
        templates=environment,
        asset_version=asset_version(),
    )
    inner: list[BaseRoute] = [
        *pages.routes(ui),
        *jobs_pages.routes(ui),
        *performance_pages.routes(ui),
        *schedule_pages.routes(ui),
        *queue_pages.routes(ui),
        *workflow_pages.routes(ui),
        *_auth_routes(ui),
        Route("/healthz", _health(ui), name="healthz"),
        Route("/robots.txt", _robots, name="robots"),
        Mount("/static", app=StaticFiles(packages=[("pgbeat.ui", "static")]), name="static"),
    ]
    routes: Sequence[BaseRoute] = inner
    if settings.prefix:
        routes = [Mount(settings.prefix, routes=inner), Route("/", _to_prefix(settings.prefix))]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        ui.store.open()
        try:
            yield
        finally:
            ui.store.close()

    return Starlette(
        routes=list(routes),
        middleware=[
            Middleware(SecurityMiddleware, settings=settings, keys=ui.keys, throttle=ui.throttle),
            Middleware(PageReads),
        ],
        exception_handlers={
            HTTPException: _http_error(ui),
            psycopg.DataError: _bad_value(ui),
            psycopg.errors.InsufficientPrivilege: _not_permitted(ui),
            psycopg.errors.QueryCanceled: _database_error(ui, "a query took too long"),
            psycopg.OperationalError: _database_error(ui, "the database is unreachable"),
            psycopg_pool.PoolTimeout: _database_error(ui, "the database is unreachable"),
        },
        lifespan=lifespan,
    )


def _health(ui: Ui) -> Any:
    def health(_request: Request) -> Response:
        try:
            with ui.store.connection() as conn:
                conn.execute(session_sql.UI_PING)
        except (psycopg.Error, psycopg_pool.PoolTimeout):
            return PlainTextResponse("database unreachable\n", status_code=503)
        return PlainTextResponse("ok\n")

    return health


def _robots(_request: Request) -> Response:
    return PlainTextResponse("User-agent: *\nDisallow: /\n")


def _to_prefix(prefix: str) -> Any:
    def to_prefix(_request: Request) -> Response:
        return RedirectResponse(prefix + "/", status_code=307)

    return to_prefix


def _auth_routes(ui: Ui) -> list[BaseRoute]:
    def login_page(request: Request) -> Response:
        return ui.render(
            request,
            "login.html",
            next=_safe_next(request, request.query_params.get("next")),
            error=None,
        )

    async def login(request: Request) -> Response:
        form = await ui.read_form(request)
        target = _safe_next(request, first(form, "next"))
        address = request.client.host if request.client else "?"
        now = time.monotonic()
        wait = ui.throttle.retry_after(address, now)
        if wait is not None:
            log.warning("ui login throttled from %s", audit_text(address))
            refused = ui.render(
                request,
                "login.html",
                status_code=429,
                next=target,
                error=f"Too many wrong tokens from this address: try again in {wait:.0f} s.",
            )
            refused.headers["retry-after"] = str(max(1, round(wait)))
            return refused
        role = token_role(ui.settings, first(form, "token"))
        if role is None:
            ui.throttle.failed(address, now)
            log.warning("ui login refused from %s", audit_text(address))
            return ui.render(
                request,
                "login.html",
                status_code=401,
                next=target,
                error="That token is not valid.",
            )
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            ui.keys.session_cookie(role),
            max_age=SESSION_SECONDS,
            path=base(request) or "/",
            httponly=True,
            samesite="strict",
            secure=ui.settings.secure_cookie or request.url.scheme == "https",
        )
        log.info("ui login as %s from %s", role, request.client.host if request.client else "?")
        return response

    async def logout(request: Request) -> Response:
        await ui.read_form(request)
        session = request.cookies.get(COOKIE)
        if session:
            ui.keys.revoke(session)  # a copy of the cookie no longer opens the dashboard
        response = RedirectResponse(href(request, "/login"), status_code=303)
        response.delete_cookie(COOKIE, path=base(request) or "/")
        return response

    return [
        Route("/login", login_page, methods=["GET"], name="login"),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"], name="logout"),
    ]


def _safe_next(request: Request, target: str | None) -> str:
    """Where to go after login: a path of this dashboard, never another site."""
    home = href(request, "/")
    if not target or not target.startswith(base(request) + "/") or target.startswith("//"):
        return home
    if "\\" in target or any(ord(c) < 32 for c in target):
        return home
    return target


def _http_error(ui: Ui) -> Any:
    def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return ui.render(
            request,
            "error.html",
            status_code=exc.status_code,
            title=f"{exc.status_code}",
            message=exc.detail,
        )

    return handle


def _bad_value(ui: Ui) -> Any:
    """A value from the URL or a form that the database cannot take (a NUL, a number past
    bigint): the request's fault, answered 400, not a 500."""

    def handle(request: Request, exc: Exception) -> Response:
        log.info("ui: refused a value the database cannot take: %s", audit_text(exc))
        return ui.render(
            request,
            "error.html",
            status_code=400,
            title="400",
            message="A value in this request is out of range or holds a NUL character.",
        )

    return handle


def _not_permitted(ui: Ui) -> Any:
    """The dashboard's database role may not do this (pgbeat_ui_viewer asked to act)."""

    def handle(request: Request, exc: Exception) -> Response:
        log.warning("ui: the database refused: %s", audit_text(str(exc).strip().split("\n")[0]))
        return ui.render(
            request,
            "error.html",
            status_code=403,
            title="403",
            message="The dashboard's database role may not do this: serve it with --read-only, "
            "or as a member of pgbeat_ui_admin to take actions.",
        )

    return handle


def _database_error(ui: Ui, what: str) -> Any:
    def handle(request: Request, exc: Exception) -> Response:
        log.warning("ui: %s: %s", what, str(exc).strip().splitlines()[0] if str(exc) else exc)
        return ui.render(
            request,
            "error.html",
            status_code=503,
            title="Database",
            message=f"This page is unavailable: {what}. Try again in a moment.",
        )

    return handle
