"""The claim's rest bookkeeping (worker/rests.py): which limited queues a worker leaves alone,
and until when. Times are plain numbers standing for monotonic seconds."""

from __future__ import annotations

import pytest

from pgbeat.worker.rests import (
    DRY_REST_UNHEARD,
    KEYS_IDLE_MAX,
    KEYS_IDLE_PAUSE,
    LIMITED_RECHECK,
    Rests,
)


def test_a_claim_begins_with_nothing_held_back() -> None:
    rests = Rests()
    rests.held_back(5.0)
    rests.begin()
    assert not rests.short and rests.wake is None


def test_held_back_keeps_the_earliest_wake() -> None:
    rests = Rests()
    rests.held_back(5.0)
    rests.held_back(3.0)
    rests.held_back(4.0)
    rests.held_back(None)
    assert rests.short and rests.wake == 3.0


def test_a_spent_queue_rests_until_its_time_and_is_held_back_meanwhile() -> None:
    rests = Rests()
    rests.rest("api", 10.0)
    rests.begin()
    assert rests.spent("api", 9.9)
    assert rests.short and rests.wake == 10.0
    assert not rests.spent("api", 10.0)
    assert not rests.spent("other", 0.0)


def test_a_full_queue_rests_until_a_slot_of_it_is_freed() -> None:
    rests = Rests()
    rests.rest("api", 100.0, full=True)
    rests.slots_freed({"default"})
    assert rests.spent("api", 1.0)  # another queue's outcome frees nothing here
    rests.slots_freed({"api"})
    assert not rests.spent("api", 1.0)


def test_a_rate_rest_is_not_ended_by_a_freed_slot_nor_by_jobs() -> None:
    rests = Rests()
    rests.rest("api", 3600.0)  # not full: only time frees a rate
    rests.slots_freed({"api"})
    rests.jobs_arrived()
    assert rests.spent("api", 1.0)


def test_a_full_rest_becomes_a_timed_one_when_rested_again_not_full() -> None:
    rests = Rests()
    rests.rest("api", 10.0, full=True)
    rests.rest("api", 3600.0)
    rests.slots_freed({"api"})
    assert rests.spent("api", 11.0)


def test_jobs_announced_end_full_rests() -> None:
    rests = Rests()
    rests.rest("api", 100.0, full=True)
    rests.jobs_arrived()
    assert not rests.spent("api", 1.0)


def test_a_settings_change_ends_every_rest() -> None:
    rests = Rests()
    rests.rest("api", 3600.0)
    rests.keys_found_none("api", 0.0)
    rests.went_dry("dry", 0.0)
    rests.settings_changed()
    assert not rests.spent("api", 1.0)
    assert not rests.keys_resting("api", 0.1)
    assert not rests.resting("dry", 0.1)


def test_forget_ends_one_queues_rests_only() -> None:
    rests = Rests()
    for queue in ("api", "other"):
        rests.rest(queue, 3600.0)
        rests.keys_found_none(queue, 0.0)
    rests.forget("api")
    assert not rests.spent("api", 1.0) and not rests.keys_resting("api", 0.1)
    assert rests.spent("other", 1.0) and rests.keys_resting("other", 0.1)


def _dry(listening: bool, next_due: float | None, now: float = 0.0) -> Rests:
    """A queue "q" that ran dry at ``now`` and whose next due job was looked up."""
    rests = Rests()
    rests.listening = listening
    rests.went_dry("q", now)
    assert rests.short
    rests.wakes(lambda queue: next_due, now)
    return rests


def test_a_dry_queue_rests_until_its_next_job_falls_due() -> None:
    rests = _dry(listening=True, next_due=30.0)
    assert rests.resting("q", 29.0)
    assert not rests.resting("q", 30.0)
    assert not rests.resting("q", 30.0)  # its rest ended: asked until it runs dry again


def test_a_dry_queue_without_a_next_job_rests_until_jobs_are_announced() -> None:
    rests = _dry(listening=True, next_due=None)
    assert rests.resting("q", 10_000.0)
    rests.jobs_arrived()
    assert not rests.resting("q", 10_000.0)


def test_a_dry_queue_rests_a_second_at_most_when_notifications_are_not_heard() -> None:
    rests = _dry(listening=False, next_due=None, now=5.0)
    assert rests.resting("q", 5.0 + DRY_REST_UNHEARD - 0.01)
    assert not rests.resting("q", 5.0 + DRY_REST_UNHEARD)


def test_a_dry_queue_is_not_resting_before_its_next_job_was_looked_up() -> None:
    rests = Rests()
    rests.listening = True
    rests.went_dry("q", 0.0)
    assert not rests.resting("q", 0.1)


def test_awake_drops_the_resting_dry_queues_as_a_set() -> None:
    rests = _dry(listening=True, next_due=30.0)
    rests.begin()
    assert rests.awake(["a", "q", "b"], 10.0) == ["a", "b"]
    assert rests.short  # their next due jobs stay in the wake-ups


def test_awake_keeps_every_queue_once_one_falls_due_or_unheard() -> None:
    assert _dry(listening=True, next_due=30.0).awake(["a", "q"], 30.0) == ["a", "q"]
    assert _dry(listening=False, next_due=30.0).awake(["a", "q"], 10.0) == ["a", "q"]


def test_wakes_reads_each_dry_queues_next_job_once_per_dry_spell() -> None:
    rests = Rests()
    asked: list[str] = []

    def next_due(queue: str) -> float | None:
        asked.append(queue)
        return 50.0

    rests.went_dry("q", 0.0)
    rests.held_back(20.0)
    assert rests.wakes(next_due, 0.0) == 20.0
    assert rests.wakes(next_due, 1.0) == 20.0
    assert asked == ["q"]
    rests.begin()
    assert rests.wakes(next_due, 2.0) == 50.0


def test_a_next_job_already_due_is_asked_again_after_the_recheck() -> None:
    rests = Rests()
    rests.went_dry("q", 0.0)
    assert rests.wakes(lambda queue: 5.0, 10.0) == 10.0 + LIMITED_RECHECK


def test_wakes_is_none_when_nothing_waits() -> None:
    assert Rests().wakes(lambda queue: None, 0.0) is None
    rests = Rests()
    rests.went_dry("q", 0.0)
    assert rests.wakes(lambda queue: None, 0.0) is None


def test_a_key_walk_that_found_none_rests_the_walk_briefly() -> None:
    rests = Rests()
    rests.keys_found_none("api", 10.0)
    assert rests.keys_resting("api", 10.0 + KEYS_IDLE_PAUSE - 0.01)
    assert not rests.keys_resting("api", 10.0 + KEYS_IDLE_PAUSE)


@pytest.mark.parametrize(
    ("timed", "walks", "pause"),
    [
        (False, 1, KEYS_IDLE_PAUSE),
        (False, 5, KEYS_IDLE_PAUSE),  # a completion may free a key: never longer
        (True, 1, KEYS_IDLE_PAUSE),
        (True, 2, 2 * KEYS_IDLE_PAUSE),
        (True, 3, 4 * KEYS_IDLE_PAUSE),
        (True, 10, KEYS_IDLE_MAX),  # capped
    ],
)
def test_fruitless_walks_pause_the_queue_doubling_only_where_time_frees_keys(
    timed: bool, walks: int, pause: float
) -> None:
    rests = Rests()
    for _ in range(walks):
        rests.fruitless_walk("api", 0.0, timed)
    assert rests.spent("api", pause - 0.001)
    assert not rests.spent("api", pause)


@pytest.mark.parametrize("reset", ["fruitful", "jobs_arrived"])
def test_a_fruitful_claim_or_announced_jobs_reset_the_doubling(reset: str) -> None:
    rests = Rests()
    for _ in range(3):
        rests.fruitless_walk("api", 0.0, timed=True)
    if reset == "fruitful":
        rests.fruitful("api")
    else:
        rests.jobs_arrived()
    rests.fruitless_walk("api", 0.0, timed=True)
    assert not rests.spent("api", KEYS_IDLE_PAUSE)


def test_announced_jobs_end_the_rest_of_a_fruitless_key_walk_not_a_spent_rate() -> None:
    """New jobs may bring free keys: a queue resting because its walked keys were all spent
    is asked again at once; a queue whose own rate is spent still waits for its window."""
    rests = Rests()
    for _ in range(4):
        rests.fruitless_walk("keys", 0.0, timed=True)
    rests.rest("rate", 30.0)  # its rate's oldest start leaves the window at 30 s
    assert rests.spent("keys", 0.5) and rests.spent("rate", 0.5)
    rests.jobs_arrived()
    assert not rests.spent("keys", 0.5)
    assert rests.spent("rate", 0.5)
    rests.fruitless_walk("keys", 0.0, timed=True)
    rests.rest("keys", 10.0)  # then its own rate spent: that rest is not a walk's
    rests.jobs_arrived()
    assert rests.spent("keys", 0.5)
