from datetime import timedelta

import pytest

from pgbeat.worker.settings import WorkerSettings, resolve_timing

S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("lease", "timeout", "expected"),
    [
        (None, None, (300 * S, 60 * S)),
        (2 * S, None, (2 * S, 60 * S)),
        (600 * S, None, (600 * S, 60 * S)),
        (None, 30 * S, (300 * S, 30 * S)),
        (None, 600 * S, (300 * S, 600 * S)),
        (10 * S, 9 * S, (10 * S, 9 * S)),
        (10 * S, 7200 * S, (10 * S, 7200 * S)),  # renewed leases: a long timeout, a short lease
    ],
)
def test_lease_and_timeout_defaults_are_independent(
    lease: timedelta | None, timeout: timedelta | None, expected: tuple[timedelta, timedelta]
) -> None:
    assert resolve_timing(lease, timeout) == expected


@pytest.mark.parametrize(("lease", "timeout"), [(0.1 * S, None), (10 * S, 0 * S), (S, -S)])
def test_lease_and_timeout_must_make_sense(lease: timedelta, timeout: timedelta | None) -> None:
    with pytest.raises(ValueError, match=r"lease|timeout"):
        resolve_timing(lease, timeout)


@pytest.mark.parametrize(
    "kwargs", [{"concurrency": 0}, {"claim_batch": 0}, {"lease": 0.1 * S, "timeout": 2 * S}]
)
def test_settings_reject_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WorkerSettings(**kwargs)  # type: ignore[arg-type]
