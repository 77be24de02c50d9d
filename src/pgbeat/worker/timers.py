"""When the worker's claiming loop next has a reason to act: poll, a job falling due, reap.

Pure: the loop passes the monotonic ``now`` in, so the timing rules are tested without a
clock or a database.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_DUE_WAIT = 0.05  # seconds: a job due "now" that another worker holds is not worth a spin


@dataclass
class ClaimTimers:
    """The claiming loop's clocks (monotonic seconds) and whether more work may be waiting.

    ``maybe_more`` is the loop's belief that a claim would find jobs: a full claim, a
    notification, a delayed job falling due or the poll timer make it true; a claim that
    came back short makes it false until one of those happens.
    """

    poll_every: float
    reap_every: float
    window: float  # how long freed slots may wait for others to share one claim
    next_poll: float = 0.0
    next_due: float | None = None  # when the earliest delayed job falls due, if known
    next_reap: float = 0.0
    last_claim: float = 0.0
    maybe_more: bool = True

    def note(self, now: float, notified: bool) -> None:
        """A notification, a delayed job falling due or the poll timer: look for work."""
        due = self.next_due is not None and now >= self.next_due
        if notified or due or now >= self.next_poll:
            self.maybe_more = True

    def claim_size(self, now: float, free: int, threshold: int, batch: int) -> int:
        """How many jobs to claim now with ``free`` slots: 0 while a few more finishing
        jobs are worth awaiting.

        Claiming for one freed slot at a time would cost a round trip per job; waiting up
        to the window for ``threshold`` slots (half of them, at most half a claim) to free
        turns many small claims into one. Every slot free is past the threshold too.
        """
        if not self.maybe_more or free == 0:
            return 0
        if free >= threshold or self.window_ended(now):
            return min(free, batch)
        return 0

    def window_ended(self, now: float) -> bool:
        """True once freed slots have waited their window since the last claim."""
        return now - self.last_claim >= self.window

    def reap_due(self, now: float) -> bool:
        return now >= self.next_reap

    def reaped(self, now: float) -> None:
        self.next_reap = now + self.reap_every

    def claimed(self, now: float, asked: int, got: int) -> None:
        """A claim for ``asked`` jobs returned ``got``: a full one suggests more wait."""
        self.last_claim = now
        self.next_poll = now + self.poll_every
        self.maybe_more = got == asked
        self.next_due = None

    def next_job_in(self, now: float, seconds: float | None) -> None:
        """The earliest pending job falls due in ``seconds`` (database clock); None: no job.

        A job due already (<= 0) fell due since the claim, or another worker holds it.
        """
        self.next_due = None if seconds is None else now + max(seconds, MIN_DUE_WAIT)

    def next_wake(self, deadline: float | None, free_slots: bool) -> float:
        """The earliest time the loop must look again, unless something wakes it first.

        ``deadline`` is the earliest running job's timeout. With no free slot, only the
        reaper and timeouts matter; with one, the claim window or the poll and due timers.
        """
        wake = self.next_reap
        if deadline is not None:
            wake = min(wake, deadline)
        if free_slots:
            if self.maybe_more:
                wake = min(wake, self.last_claim + self.window)
            else:
                wake = min(wake, self.next_poll)
                if self.next_due is not None:
                    wake = min(wake, self.next_due)
        return wake
