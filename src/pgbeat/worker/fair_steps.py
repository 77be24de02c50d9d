"""In how many claims a worker hands out a fair queue's free slots: the pace of its steps.

Pure, no I/O: the Claimer tells it how long each claim of the queue took (its round trip)
and how long the queue's jobs ran (their handlers, from the outcomes it wrote). Jobs
claimed together end together: a claim that takes every free slot of a queue of long jobs
frees them all again one job length later, so a new key's job waits up to that length for
a slot. Handed out in small steps, the starts, and so the frees, spread over the job's
length. Jobs shorter than a few round trips gain nothing from it, and the claims under the
queue's row lock would set their pace: they get one step (every slot).

Small steps need claims often enough to keep up with the frees: several workers' claims
interleave, one worker's come one after another. So the steps shrink (larger claims) when
a worker's stepped claims find the queue's free slots growing from one to the next (the
claims fall behind: a lone worker's 1/25 steps had cost the backlog 43 % of its starts),
and grow back, a little each time, while the free slots go down from one stepped claim to
the next or a claim takes every free one: a lone worker's steps settle where its claims
just keep up.

A job's length is its handlers' own run time, not a claim's end to the next slot it freed
(the estimate before: 8-35 ms for 20 ms jobs, from the outcome writer's batching and
whichever claim's jobs freed first), so a no-op job (under a millisecond) is told from a
20 ms one. The constants below are docs/flow-control.md's ("Seventh session").
"""

from __future__ import annotations

from collections.abc import Mapping

STEPS_MAX = 25  # a claim takes at least 1/STEPS_MAX of the queue's concurrency
LONG_JOB = 2  # in round trips: shorter jobs get one step (the claims would set their pace)
ROUND_TRIPS_PER_STEP = 0.5  # a step's length: the workers' claims of the queue interleave
SMOOTHING = 0.2  # weight of a new sample in the running estimates
SHRINK = 0.7  # the steps' share of their estimate after stepped claims that fell behind
GROW = 1.05  # ... after claims that caught up or took every free slot (back to 1 at most)


class FairSteps:
    """Per fair queue (seconds): the estimated job length and claim round trip, and the
    number of steps they give (1 until both are known)."""

    def __init__(self) -> None:
        self._job: dict[str, float] = {}
        self._round_trip: dict[str, float] = {}
        self._share: dict[str, float] = {}  # of the estimated steps, 1 until claims fall behind
        self._left: dict[str, int] = {}  # the free slots the last claim found, if it stepped

    def claimed(self, queue: str, began: float, ended: float) -> None:
        """A claim of ``queue`` ran from ``began`` to ``ended`` (monotonic seconds)."""
        self._round_trip[queue] = _smooth(self._round_trip.get(queue), ended - began)

    def took(self, queue: str, free: int, stepped: bool) -> None:
        """A claim of ``queue`` took jobs, where it found ``free`` slots it could take;
        ``stepped``: it left some of them for the next step."""
        before = self._left.pop(queue, None)
        share = self._share.get(queue, 1.0)
        if not stepped:
            self._share[queue] = min(1.0, share * GROW)
            return
        if before is not None and free >= before:  # the free slots grew through a step
            self._share[queue] = max(1.0 / STEPS_MAX, share * SHRINK)
        elif before is not None:  # they went down: the claims keep up, smaller steps may too
            self._share[queue] = min(1.0, share * GROW)
        self._left[queue] = free

    def ran(self, runs: Mapping[str, float]) -> None:
        """Jobs of these queues ended after running this long (the longest of each write)."""
        for queue, seconds in runs.items():
            if seconds >= 0:
                self._job[queue] = _smooth(self._job.get(queue), seconds)

    def steps(self, queue: str) -> int:
        """How many claims the queue's concurrency is handed out in, from 1 to STEPS_MAX."""
        job, round_trip = self._job.get(queue), self._round_trip.get(queue)
        if job is None or round_trip is None or round_trip <= 0 or job < LONG_JOB * round_trip:
            return 1
        estimate = min(STEPS_MAX, job / (ROUND_TRIPS_PER_STEP * round_trip))
        return max(1, int(estimate * self._share.get(queue, 1.0)))


def _smooth(old: float | None, sample: float) -> float:
    return sample if old is None else old + SMOOTHING * (sample - old)
