"""Who may see and change what: the Host allow-list, token sessions, CSRF, response headers.

One ASGI middleware runs before every route. It refuses a foreign Host (DNS rebinding)
with 400, asks for a login when a token is set, refuses cross-site or read-only POSTs
with 403, throttles an address that keeps presenting wrong tokens (429), and adds a strict
Content-Security-Policy to every response. The CSRF token itself is checked where the form
is read (``verify_form``); a logged-out session stays revoked until it would have expired.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote

from pgbeat.ui.settings import UiSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("pgbeat.ui")
COOKIE = "pgbeat_session"
SESSION_SECONDS = 12 * 3600
# Failed logins (form or bearer) per client address: this many within the window, and the
# address is refused until the oldest of them leaves it. Addresses kept: the most recent.
MAX_FAILED_LOGINS = 5
FAILED_LOGIN_WINDOW = 60.0
MAX_TRACKED_ADDRESSES = 10_000
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    # Not no-referrer: under it browsers send "Origin: null" with same-origin form posts,
    # and the Origin check below needs the real one. Other sites still get no referrer.
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"x-robots-tag", b"noindex, nofollow"),
]
_PUBLIC = ("/healthz", "/login", "/static/", "/robots.txt")


@dataclass(frozen=True)
class Identity:
    """The requester: ``admin`` may act, ``viewer`` may only look."""

    role: str
    who: str
    session: str  # what the CSRF token is bound to

    @property
    def can_act(self) -> bool:
        return self.role == "admin"


class Keys:
    """The per-process secret that signs sessions and CSRF tokens, and the sessions that
    logged out (kept until they would have expired anyway)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self._revoked: dict[str, float] = {}  # session cookie -> when it expires

    def revoke(self, value: str, now: float | None = None) -> None:
        """End a session before its time: its cookie is refused from now on (logout)."""
        now = time.time() if now is None else now
        self._revoked = {v: until for v, until in self._revoked.items() if until > now}
        if self.read_session(value, now) is not None:
            issued = value.split(".")[1]
            self._revoked[value] = int(issued) + SESSION_SECONDS + 1

    def sign(self, text: str) -> str:
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def session_cookie(self, role: str, now: float | None = None) -> str:
        issued = int(time.time() if now is None else now)
        nonce = secrets.token_hex(8)
        body = f"{role}.{issued}.{nonce}"
        return f"{body}.{self.sign(body)}"

    def read_session(self, value: str, now: float | None = None) -> str | None:
        """The role a session cookie grants, or None if forged or expired."""
        body, _, signature = value.rpartition(".")
        if not body or not hmac.compare_digest(self.sign(body), signature):
            return None
        role, issued, _ = ([*body.split("."), "", ""])[:3]
        age = (time.time() if now is None else now) - int(issued or 0)
        if role not in ("admin", "viewer") or not 0 <= age <= SESSION_SECONDS:
            return None
        if value in self._revoked:
            return None
        return role

    def csrf_token(self, session: str) -> str:
        return self.sign(f"csrf:{session}")

    def csrf_ok(self, session: str, token: str) -> bool:
        return hmac.compare_digest(self.csrf_token(session), token)


class LoginThrottle:
    """Failed logins by client address, in a sliding window (``now``: monotonic seconds)."""

    def __init__(self, limit: int = MAX_FAILED_LOGINS, window: float = FAILED_LOGIN_WINDOW) -> None:
        self.limit = limit
        self.window = window
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str, now: float) -> float | None:
        """Seconds until ``address`` may try again, or None if it may now."""
        failures = self._failures.get(address)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        if len(failures) < self.limit:
            return None
        return failures[0] + self.window - now

    def failed(self, address: str, now: float) -> None:
        """Count a wrong token from ``address``."""
        failures = self._failures.pop(address, None) or deque(maxlen=self.limit)
        failures.append(now)
        self._failures[address] = failures  # most recent last
        while len(self._failures) > MAX_TRACKED_ADDRESSES:
            self._failures.popitem(last=False)


def audit_text(value: object) -> str:
    """A value for one log line: as it is when printable, else quoted with its escapes, so
    a newline in a filter or a name cannot start a forged line."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def token_role(settings: UiSettings, token: str) -> str | None:
    """Which role a presented token grants (compared in constant time)."""
    supplied = token.strip().encode()
    if settings.token and hmac.compare_digest(supplied, settings.token.encode()):
        return "viewer" if settings.read_only else "admin"
    if settings.viewer_token and hmac.compare_digest(supplied, settings.viewer_token.encode()):
        return "viewer"
    return None


def same_origin(headers: dict[str, str]) -> bool:
    """False for a POST another site made the browser send (Sec-Fetch-Site or Origin)."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site != "same-origin":
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    netloc = origin.partition("://")[2]
    return bool(netloc) and netloc.lower() == headers.get("host", "").lower()


class SecurityMiddleware:
    """Host check, authentication, cross-site and read-only refusal, security headers."""

    def __init__(
        self, app: ASGIApp, settings: UiSettings, keys: Keys, throttle: LoginThrottle
    ) -> None:
        self.app = app
        self.settings = settings
        self.keys = keys
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        send = _with_headers(send)
        if not self.settings.host_allowed(headers.get("host", "")):
            await _plain(send, 400, "Invalid Host header")
            return
        # Mounted in another app (Starlette's Mount, FastAPI, Django's ASGI router), the
        # dashboard's paths start with the mount's root_path: links and redirects keep it.
        root = str(scope.get("root_path", "")).rstrip("/")
        path = _strip_prefix(_strip_prefix(scope["path"], root), self.settings.prefix)
        try:
            identity = self._identify(headers, scope)
        except _Throttled as throttled:
            await _plain(send, 429, "Too many wrong tokens from this address", throttled.headers)
            return
        scope.setdefault("state", {})["identity"] = identity
        public = path == "/healthz" or path.startswith(_PUBLIC)
        if identity is None and not public:
            if scope["method"] in ("GET", "HEAD"):
                target = quote(scope["path"] + _query(scope), safe="/?=&")
                await _redirect(send, f"{root}{self.settings.prefix}/login?next={target}")
            else:
                await _plain(send, 401, "Log in first")
            return
        if scope["method"] not in ("GET", "HEAD"):
            if not same_origin(headers):
                await _plain(send, 403, "Cross-site request refused")
                return
            acting = path not in ("/login", "/logout")
            if acting and (identity is None or not identity.can_act):
                await _plain(send, 403, "Read-only: actions are disabled")
                return
        await self.app(scope, receive, send)

    def _identify(self, headers: dict[str, str], scope: Scope) -> Identity | None:
        client = scope.get("client") or ("?", 0)
        if not self.settings.auth_required:
            anon_role = "viewer" if self.settings.read_only else "admin"
            return Identity(anon_role, f"anon@{client[0]}", "anon")
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        if COOKIE in cookie:
            value = cookie[COOKIE].value
            session_role = self.keys.read_session(value)
            if session_role is not None:
                return Identity(session_role, f"{session_role}@{client[0]}", value)
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            now = time.monotonic()
            wait = self.throttle.retry_after(str(client[0]), now)
            if wait is not None:
                raise _Throttled(wait)
            token_grant = token_role(self.settings, auth[7:])
            if token_grant is not None:
                return Identity(token_grant, f"{token_grant}-token@{client[0]}", "bearer")
            self.throttle.failed(str(client[0]), now)
            log.warning("ui bearer token refused from %s", audit_text(client[0]))
        return None


class _Throttled(Exception):
    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.headers = [(b"retry-after", str(max(1, round(wait))).encode())]


def _strip_prefix(path: str, prefix: str) -> str:
    if prefix and (path == prefix or path.startswith(prefix + "/")):
        return path[len(prefix) :] or "/"
    return path


def _query(scope: Scope) -> str:
    raw = scope.get("query_string", b"")
    return "?" + raw.decode("latin-1") if raw else ""


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            names = {name.lower() for name, _ in headers}
            headers += [h for h in _HEADERS if h[0] not in names]
            if b"cache-control" not in names:
                headers.append((b"cache-control", b"no-store"))
            message["headers"] = headers
        await send(message)

    return sending


async def _plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode() + b"\n"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
