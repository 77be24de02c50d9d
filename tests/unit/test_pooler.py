"""What connections carry with and without a transaction pooler (db/pooler.py)."""

from __future__ import annotations

import pytest

from pgbeat.db import pooler
from pgbeat.errors import UserError

URL = "postgresql://app@db/app"


@pytest.fixture(autouse=True)
def no_pooler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pooler.POOLER_ENV, raising=False)
    monkeypatch.delenv(pooler.LISTEN_URL_ENV, raising=False)


def test_direct_connections_keep_session_settings_and_listen() -> None:
    assert pooler.pooler() is None
    assert "prepare_threshold" not in pooler.connection_options(URL)
    assert pooler.session_options(URL, {"synchronous_commit": "off"}) == "-c synchronous_commit=off"
    with_options = URL + "?options=-c%20search_path%3Dq"
    assert pooler.session_options(with_options, {"a": "b"}) == "-c search_path=q -c a=b"
    assert pooler.listen_url(URL) == URL


def test_transaction_pooler_keeps_no_session_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pooler.POOLER_ENV, "Transaction")
    assert pooler.pooler() == "transaction"
    assert pooler.connection_options(URL)["prepare_threshold"] is None
    assert pooler.session_options(URL, {"synchronous_commit": "off"}) is None
    assert pooler.listen_url(URL) is None
    monkeypatch.setenv(pooler.LISTEN_URL_ENV, "postgresql://app@db-direct/app")
    assert pooler.listen_url(URL) == "postgresql://app@db-direct/app"


def test_tcp_timeouts_unless_the_url_sets_its_own() -> None:
    assert pooler.connection_options(URL) == pooler.TCP_TIMEOUTS
    own = pooler.connection_options(URL + "?keepalives_idle=60&tcp_user_timeout=0")
    assert "keepalives_idle" not in own and "tcp_user_timeout" not in own
    assert own["keepalives_count"] == "3"


@pytest.mark.parametrize("value", ["session", "statement", "yes"])
def test_unknown_pooler_modes_are_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(pooler.POOLER_ENV, value)
    with pytest.raises(UserError, match="PGBEAT_POOLER must be one of none, transaction"):
        pooler.pooler()
