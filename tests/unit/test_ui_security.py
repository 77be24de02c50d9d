"""The dashboard's login rules without a server: the failed-login window, revoked sessions,
audit text. Every clock is a parameter."""

from __future__ import annotations

import pytest

from pgbeat.ui import security
from pgbeat.ui.security import Keys, LoginThrottle, audit_text


def test_an_address_waits_after_too_many_failures_within_the_window() -> None:
    throttle = LoginThrottle(limit=3, window=60.0)
    for second in (0.0, 10.0, 20.0):
        assert throttle.retry_after("1.2.3.4", second) is None
        throttle.failed("1.2.3.4", second)
    assert throttle.retry_after("1.2.3.4", 30.0) == pytest.approx(30.0)  # the first ages out at 60
    assert throttle.retry_after("5.6.7.8", 30.0) is None  # another address is not affected
    assert throttle.retry_after("1.2.3.4", 60.0) is None  # one failure left the window


def test_the_addresses_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(security, "MAX_TRACKED_ADDRESSES", 3)
    throttle = LoginThrottle(limit=1, window=60.0)
    for address in ("a", "b", "c", "d"):
        throttle.failed(address, 0.0)
    assert throttle.retry_after("a", 1.0) is None  # the oldest address was forgotten
    assert throttle.retry_after("d", 1.0) is not None


def test_a_revoked_session_is_refused_until_it_would_have_expired() -> None:
    keys = Keys(b"k" * 32)
    cookie = keys.session_cookie("admin", now=1000.0)
    other = keys.session_cookie("admin", now=1000.0)
    keys.revoke(cookie, now=1001.0)
    assert keys.read_session(cookie, now=1002.0) is None
    assert keys.read_session(other, now=1002.0) == "admin"
    keys.revoke("forged.1000.x.00", now=1003.0)  # a forged cookie is not remembered
    later = 1000.0 + security.SESSION_SECONDS + 10
    keys.revoke(keys.session_cookie("viewer", now=later), now=later)  # prunes expired ones
    assert cookie not in keys._revoked


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("retry", "retry"),
        ("a\nb", "'a\\nb'"),
        ("tab\there", "'tab\\there'"),
        ("line\u2028separator", "'line\\u2028separator'"),
        (7, "7"),
    ],
)
def test_audit_text_escapes_what_could_start_a_line(value: object, shown: str) -> None:
    assert audit_text(value) == shown
