"""A database URL's password, or any piece of it, never survives redact() or scrub().

The messages are the ones libpq writes for each URL (read from a real connection attempt
in tests/chaos/test_security.py): an unescaped "@" in a password makes libpq take the
rest of the password as part of the host name.
"""

from __future__ import annotations

import pytest

from pgbeat.db.urls import redact, scrub

CASES = [
    # (url, a message libpq writes for it, every secret piece)
    (
        "postgresql://app:pa@ss@127.0.0.1:5432/db",
        "failed to resolve host 'ss@127.0.0.1': [Errno -2] Name or service not known",
        ["pa", "ss"],
    ),
    (
        "postgresql://app:pa@ss@wo@127.0.0.1/db",
        "failed to resolve host 'ss@wo@127.0.0.1': [Errno -2] Name or service not known",
        ["pa", "ss", "wo"],
    ),
    (
        "postgresql://app:sec/ret@127.0.0.1:5432/db",
        'invalid integer value "sec" for connection option "port"; database "ret@127.0.0.1"',
        ["sec", "ret"],
    ),
    (
        "postgresql://app:s%40cret@127.0.0.1:5432/db",
        'password authentication failed for user "app" (password "s@cret")',
        ["s@cret", "s%40cret"],
    ),
    (
        "postgresql://app@127.0.0.1:5432/db?password=s3cret",
        "connection failed: FATAL: password s3cret rejected",
        ["s3cret"],
    ),
    (
        "host=127.0.0.1 port=5432 user=app password=s3cret dbname=db",
        "connection failed: FATAL: password s3cret rejected",
        ["s3cret"],
    ),
]


@pytest.mark.parametrize(("url", "message", "secrets"), CASES)
def test_scrub_removes_every_piece_of_the_password(
    url: str, message: str, secrets: list[str]
) -> None:
    for secret in secrets:
        assert secret in message or secret in url  # the case can fail
    scrubbed = scrub(message, url)
    assert "***" in scrubbed
    for secret in secrets:
        assert secret not in scrubbed, scrubbed


@pytest.mark.parametrize(("url", "message", "secrets"), CASES)
def test_redact_keeps_the_url_readable_without_its_password(
    url: str, message: str, secrets: list[str]
) -> None:
    redacted = redact(url)
    assert "127.0.0.1" in redacted and "***" in redacted
    for secret in secrets:
        assert secret not in redacted, redacted


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://app:pa@ss@db.example:5432/app", "postgresql://app:***@db.example:5432/app"),
        (
            "postgresql://app:x/y@db/app?sslmode=require",
            "postgresql://app:***@db/app?sslmode=require",
        ),
        (
            "postgresql://app@db/app?password=x&sslmode=require",
            "postgresql://app@db/app?password=***&sslmode=require",
        ),
        ("postgresql://app@db/app", "postgresql://app@db/app"),
    ],
)
def test_redact_replaces_only_the_password(url: str, expected: str) -> None:
    assert redact(url) == expected


def test_scrub_leaves_a_message_without_a_password_alone() -> None:
    message = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    assert scrub(message, "postgresql://app@127.0.0.1:1/db") == message
    assert scrub(message, "") == message
