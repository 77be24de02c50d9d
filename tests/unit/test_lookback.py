"""When a replica looks back (after a reconnect), and the history retention it needs."""

from __future__ import annotations

from datetime import timedelta

from pgbeat.scheduling.catchup import ON_TIME
from pgbeat.scheduling.lookback import LookBack, retention_for


def test_the_first_connection_is_a_start_and_each_new_one_a_reconnect() -> None:
    look = LookBack()
    assert look.reconnected(1) is False  # the first tick: the start looks back anyway
    assert look.reconnected(1) is False
    assert look.reconnected(2) is True
    assert look.reconnected(2) is False
    assert look.reconnected(5) is True  # several reconnects between two ticks: one look


def test_the_retention_is_never_shorter_than_the_longest_look_back() -> None:
    margin = ON_TIME + timedelta(minutes=1)
    assert retention_for(timedelta(days=30), None) == timedelta(days=30)
    assert retention_for(timedelta(days=30), timedelta(hours=1)) == timedelta(days=30)
    assert retention_for(timedelta(hours=1), timedelta(days=3)) == timedelta(days=3) + margin
    assert retention_for(timedelta(days=3), timedelta(days=3)) == timedelta(days=3) + margin
