"""In how many claims a worker hands out a fair queue's free slots: the pace of its steps.

Pure, no I/O: the Claimer tells it when a claim of the queue ran (and whether it took
jobs) and when the worker's own jobs of the queue left running; it estimates each queue's
job length (from a claim that took jobs to the next slots it freed) and round trip. Jobs
claimed together end together: a claim that takes every free slot of a queue of long jobs
frees them all again one job length later, so a new key's job waits up to that length for
a slot. Handed out in steps about a round trip apart, the starts, and so the frees, spread
over the job's length. Jobs shorter than a few round trips gain nothing from it, and the
claims under the queue's row lock would set their pace: they get one step (every slot).
"""

from __future__ import annotations

from collections.abc import Set

STEPS_MAX = 8  # a claim takes at least 1/STEPS_MAX of the queue's concurrency
ROUND_TRIPS_PER_STEP = 2  # a step's length: a claim's round trip and the loop's next turn
SMOOTHING = 0.2  # weight of a new sample in the running estimates


class FairSteps:
    """Per fair queue (monotonic seconds): the estimated job length and claim round trip,
    and the number of steps they give (1 until both are known)."""

    def __init__(self) -> None:
        self._job: dict[str, float] = {}
        self._round_trip: dict[str, float] = {}
        self._outstanding: dict[str, float] = {}  # the oldest claim not followed by a free

    def claimed(self, queue: str, began: float, ended: float, took: bool) -> None:
        """A claim of ``queue`` ran from ``began`` to ``ended``; ``took``: it took jobs."""
        self._round_trip[queue] = _smooth(self._round_trip.get(queue), ended - began)
        if took:
            self._outstanding.setdefault(queue, ended)

    def freed(self, queues: Set[str], now: float) -> None:
        """Jobs of these queues left running here: the oldest claim's jobs, most likely."""
        for queue in queues:
            since = self._outstanding.pop(queue, None)
            if since is not None and now >= since:
                self._job[queue] = _smooth(self._job.get(queue), now - since)

    def steps(self, queue: str) -> int:
        """How many claims the queue's concurrency is handed out in, from 1 to STEPS_MAX."""
        job, round_trip = self._job.get(queue), self._round_trip.get(queue)
        if job is None or round_trip is None or round_trip <= 0:
            return 1
        return max(1, min(STEPS_MAX, int(job / (ROUND_TRIPS_PER_STEP * round_trip))))


def _smooth(old: float | None, sample: float) -> float:
    return sample if old is None else old + SMOOTHING * (sample - old)
