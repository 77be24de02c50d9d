"""What every page shares: settings, the pool, templates, links under the prefix, forms.

``href`` builds every link from the request's root path, so the dashboard works under
``--prefix`` and when an application mounts it anywhere. ``read_form`` is the one way a
POST body is read: url-encoded only, with its CSRF token checked.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from pgbeat.ui import timefmt
from pgbeat.ui.schedule_source import ScheduleCatalog
from pgbeat.ui.security import Identity, Keys, LoginThrottle, audit_text
from pgbeat.ui.settings import UiSettings
from pgbeat.ui.store import Store

audit = logging.getLogger("pgbeat.ui.audit")
FLASH_COOKIE = "pgbeat_flash"
MAX_FORM_BYTES = 64 * 1024


@dataclass
class Ui:
    """The dashboard's shared state, built once by ``create_app``."""

    settings: UiSettings
    keys: Keys
    throttle: LoginThrottle
    store: Store
    schedules: ScheduleCatalog
    templates: jinja2.Environment
    asset_version: str

    def identity(self, request: Request) -> Identity:
        identity: Identity | None = request.scope.get("state", {}).get("identity")
        if identity is None:  # the middleware lets anonymous requests reach public pages only
            return Identity("anonymous", "anonymous", "anon")
        return identity

    def can_act(self, request: Request) -> bool:
        return not self.settings.read_only and self.identity(request).can_act

    def render(
        self, request: Request, template: str, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        identity = self.identity(request)
        flash = request.cookies.get(FLASH_COOKIE)
        page = self.templates.get_template(template).render(
            request=request,
            base=base(request),
            identity=identity,
            can_act=self.can_act(request),
            read_only=not self.can_act(request),
            auth_required=self.settings.auth_required,
            csrf=self.keys.csrf_token(identity.session),
            refresh=self.settings.refresh_seconds,
            asset_version=self.asset_version,
            flash=unquote(flash)[:300] if flash else None,
            t=timefmt,
            schema=self.store.schema,
            **context,
        )
        response = HTMLResponse(page, status_code=status_code)
        if flash:
            response.delete_cookie(FLASH_COOKIE, path=base(request) or "/")
        return response

    async def read_form(self, request: Request) -> dict[str, list[str]]:
        """The url-encoded body of a POST, after its CSRF token is checked (403 if not)."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        if content_type != "application/x-www-form-urlencoded":
            raise HTTPException(415, "forms are url-encoded")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, "form too large")
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        token = (form.get("csrf") or [""])[0]
        if not self.keys.csrf_ok(self.identity(request).session, token):
            raise HTTPException(403, "missing or stale form token: reload the page")
        return form

    def log_action(self, request: Request, action: str, **fields: Any) -> None:
        """One audit line per action: who did what to which jobs, and what came of it."""
        who = self.identity(request).who
        details = " ".join(f"{k}={audit_text(v)}" for k, v in fields.items())
        audit.info(
            "ui action %s by %s: %s",
            action,
            who,
            details,
            extra={"who": who, "action": action, **fields},
        )


def base(request: Request) -> str:
    """The path every dashboard link starts with (the prefix, or where it is mounted)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def href(request: Request, path: str) -> str:
    return base(request) + path


def redirect(request: Request, path: str, flash: str | None = None) -> Response:
    """303 to a dashboard path (the POST-redirect-GET of every form), with a message."""
    response = RedirectResponse(href(request, path), status_code=303)
    if flash:
        response.set_cookie(
            FLASH_COOKIE,
            quote(flash)[:600],
            max_age=60,
            path=base(request) or "/",
            httponly=True,
            samesite="strict",
        )
    return response


def first(form: dict[str, list[str]], name: str, default: str = "") -> str:
    return (form.get(name) or [default])[0]


def asset_version() -> str:
    """A short hash of the static files, so browsers fetch them again after an upgrade."""
    digest = hashlib.sha256()
    folder = resources.files("pgbeat.ui").joinpath("static")
    for name in ("pgbeat.css", "pgbeat.js"):
        digest.update(folder.joinpath(name).read_bytes())
    return digest.hexdigest()[:10]


def now_of(row: dict[str, Any]) -> datetime:
    value: datetime = row["now"]
    return value
