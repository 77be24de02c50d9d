import random
from datetime import UTC, datetime, timedelta

import pytest

from pgbeat.backoff import BackoffPolicy
from pgbeat.errors import (
    CancelRequested,
    PayloadError,
    PermanentError,
    Released,
    ResultError,
    Retry,
    Snooze,
    TimedOut,
    UnknownKind,
)
from pgbeat.job import Job
from pgbeat.worker.verdict import decide, describe_error

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = BackoffPolicy(jitter=0)


def job(attempt: int, max_attempts: int = 3) -> Job:
    return Job(1, "k", {}, attempt, max_attempts, T0, T0, None)


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_success_is_done() -> None:
    assert decide(job(1), None, POLICY, random.Random(0)).verdict == "done"


def test_failure_with_attempts_left_retries_with_backoff() -> None:
    outcome = decide(job(2), raised(ValueError("boom")), POLICY, random.Random(0))
    assert outcome.verdict == "retry"
    assert outcome.retry_at == timedelta(seconds=4)
    assert outcome.error is not None
    assert outcome.error.startswith("ValueError: boom")
    assert "Traceback" not in outcome.error.splitlines()[0]
    assert "raise exc" in outcome.error  # the stack is kept for debugging


def test_last_attempt_fails() -> None:
    outcome = decide(job(3), raised(ValueError("boom")), POLICY, random.Random(0))
    assert outcome.verdict == "failed"


@pytest.mark.parametrize("error", [PermanentError("no"), PayloadError("bad"), UnknownKind("who?")])
def test_permanent_errors_fail_on_first_attempt(error: Exception) -> None:
    assert decide(job(1), error, POLICY, random.Random(0)).verdict == "failed"


def test_timeout_is_a_failed_attempt() -> None:
    outcome = decide(job(1), TimedOut("timed out after 1s"), POLICY, random.Random(0))
    assert outcome.verdict == "retry"
    assert outcome.error == "TimedOut: timed out after 1s"


def test_retry_request_uses_its_own_time() -> None:
    at = T0 + timedelta(hours=1)
    assert decide(job(1), Retry(after=at), POLICY, random.Random(0)).retry_at == at
    later = decide(job(1), Retry(after=30), POLICY, random.Random(0))
    assert later.retry_at == timedelta(seconds=30)


def test_retry_request_on_last_attempt_fails() -> None:
    assert decide(job(3), Retry(after=5), POLICY, random.Random(0)).verdict == "failed"


def test_released_at_shutdown() -> None:
    assert decide(job(1), Released("bye"), POLICY, random.Random(0)).verdict == "released"


def test_retry_rejects_naive_datetime() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Retry(after=datetime(2026, 1, 1))  # noqa: DTZ001


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


def test_an_error_whose_str_raises_is_still_described() -> None:
    outcome = decide(job(1), raised(Unprintable()), POLICY, random.Random(0))
    assert outcome.verdict == "retry"
    assert outcome.error is not None
    assert outcome.error.startswith("Unprintable: <str() of this exception raised RuntimeError>")
    assert describe_error(Unprintable()) == (
        "Unprintable: <str() of this exception raised RuntimeError>"
    )


def test_a_snooze_spends_no_attempt_even_on_the_last_one() -> None:
    outcome = decide(job(3), raised(Snooze(30)), POLICY, random.Random(0))
    assert (outcome.verdict, outcome.retry_at) == ("snoozed", timedelta(seconds=30))
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert decide(job(1), Snooze(at), POLICY, random.Random(0)).retry_at == at


def test_a_cancel_and_an_unstorable_result_have_their_verdicts() -> None:
    cancelled = decide(job(1), CancelRequested("cancelled while running"), POLICY, random.Random(0))
    assert (cancelled.verdict, cancelled.error) == (
        "cancelled",
        "CancelRequested: cancelled while running",
    )
    assert decide(job(1), ResultError("too big"), POLICY, random.Random(0)).verdict == "failed"
