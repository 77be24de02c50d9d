"""How often the worker's claim loop asks whether tracing is configured."""

from __future__ import annotations

import pytest

from pgbeat.observe import tracing


def _asks(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> list[int]:
    """Make ``configured()`` answer from ``answers`` in turn; the returned list counts asks."""
    asked: list[int] = []

    def configured() -> bool:
        asked.append(1)
        return answers[min(len(asked), len(answers)) - 1]

    monkeypatch.setattr(tracing, "configured", configured)
    return asked


def test_while_off_it_asks_at_most_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asks(monkeypatch, [False])
    check = tracing.ProviderCheck()
    assert [check(100.0 + 0.01 * i) for i in range(100)] == [False] * 100  # 100.00-100.99
    assert len(asked) == 1
    assert check(101.0) is False
    assert len(asked) == 2


def test_a_provider_installed_later_is_seen_within_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _asks(monkeypatch, [False, True])
    check = tracing.ProviderCheck()
    assert check(5.0) is False
    assert check(5.5) is False  # installed meanwhile, not asked yet
    assert check(6.0) is True
    assert len(asked) == 2


def test_once_on_it_stays_on_without_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asks(monkeypatch, [True])
    check = tracing.ProviderCheck()
    assert all(check(float(i)) for i in range(1000))
    assert len(asked) == 1
