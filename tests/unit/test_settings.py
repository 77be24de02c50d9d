from datetime import timedelta

import pytest

from pgbeat.worker.settings import WorkerSettings, resolve_timing

S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("lease", "timeout", "expected"),
    [
        (None, None, (300 * S, 60 * S)),
        (2 * S, None, (2 * S, 1.6 * S)),
        (600 * S, None, (600 * S, 60 * S)),
        (None, 30 * S, (300 * S, 30 * S)),
        (None, 600 * S, (750 * S, 600 * S)),
        (10 * S, 9 * S, (10 * S, 9 * S)),
    ],
)
def test_defaults_keep_the_timeout_inside_the_lease(
    lease: timedelta | None, timeout: timedelta | None, expected: tuple[timedelta, timedelta]
) -> None:
    assert resolve_timing(lease, timeout) == expected


@pytest.mark.parametrize(("lease", "timeout"), [(10 * S, 10 * S), (10 * S, 11 * S)])
def test_timeout_must_be_shorter_than_the_lease(lease: timedelta, timeout: timedelta) -> None:
    with pytest.raises(ValueError, match="shorter than the lease"):
        resolve_timing(lease, timeout)


@pytest.mark.parametrize(
    "kwargs", [{"concurrency": 0}, {"claim_batch": 0}, {"lease": S, "timeout": 2 * S}]
)
def test_settings_reject_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WorkerSettings(**kwargs)  # type: ignore[arg-type]
