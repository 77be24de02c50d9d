"""Which limited queues a worker leaves alone, and until when: the claim's rest bookkeeping.

Pure state, no I/O: the Claimer tells it what each claim found (spent, full, dry, keys that
gave nothing) and asks it which queues to claim now and when to look again. Every rest is
a hint; the claim statements re-read the settings they enforce, so a rest that ends too
early costs a round trip, never a violated limit.
"""

from __future__ import annotations

from collections.abc import Callable, Set

LIMITED_RECHECK = 0.05  # seconds before a queue whose limits were spent is asked again, unheard
KEYS_IDLE_PAUSE = 0.2  # seconds before a key-by-key claim that found nothing runs again
KEYS_IDLE_MAX = 1.6  # ... doubling up to this while only time frees the keys (key_rate)
DRY_REST_UNHEARD = 1.0  # seconds a dry limited queue rests when notifications are not heard


class Rests:
    """The rests of one worker's limited queues (monotonic seconds throughout).

    A queue whose limits were spent rests until its rate's oldest start leaves the window,
    or, when its slots or keys were full, until a job of it leaves running here
    (slots_freed), jobs are announced, or LIMITED_RECHECK; a queue that ran out of due
    jobs rests until jobs are announced or its next job falls due (DRY_REST_UNHEARD at most
    while notifications are not heard); a change of a queue's settings ends its rests.
    ``short`` says the last claim left a limited queue with due jobs it did not give, and
    ``wake`` when one may give more: the loop then asks again soon.
    """

    def __init__(self) -> None:
        self.listening = False  # notifications are heard: a dry queue rests until one
        self.short = False
        self.wake: float | None = None
        self._until: dict[str, float] = {}  # per queue: its limits are spent
        self._full: set[str] = set()  # ... because their slots were full (concurrency)
        self._dry: set[str] = set()  # queues that ran out of due jobs
        self._dry_due: dict[str, float | None] = {}  # their next due job, or none
        self._dry_since: dict[str, float] = {}  # when each ran dry
        self._keys_until: dict[str, float] = {}  # per queue: its key-by-key claim rests
        self._fruitless: dict[str, int] = {}  # per timed keyed queue: walks in a row found none
        self._walked_out: set[str] = set()  # queues resting after a fruitless key walk

    def begin(self) -> None:
        """A claim starts: nothing is held back yet."""
        self.short = False
        self.wake = None

    def held_back(self, until: float | None) -> None:
        """A limited queue gave fewer jobs than asked; it may give more at ``until``."""
        self.short = True
        if until is not None and (self.wake is None or until < self.wake):
            self.wake = until

    def rest(self, queue: str, until: float, full: bool = False) -> None:
        """Leave a queue alone until ``until``; ``full``: its slots were, and slots_freed
        ends the rest sooner."""
        self._until[queue] = until
        self._walked_out.discard(queue)  # fruitless_walk marks its own after this
        if full:
            self._full.add(queue)
        else:
            self._full.discard(queue)
        self.held_back(until)

    def spent(self, queue: str, now: float) -> bool:
        """Whether a queue's limits were spent a moment ago (it is then held back)."""
        until = self._until.get(queue, 0.0)
        if now < until:
            self.held_back(until)
            return True
        return False

    def went_dry(self, queue: str, now: float) -> None:
        """A queue gave nothing and has no due job: it rests until jobs or its next due one."""
        self.short = True
        self._dry.add(queue)
        self._dry_since[queue] = now

    def slots_freed(self, queues: Set[str]) -> None:
        """Jobs of these queues left running here, or jobs were announced: the queues that
        rest because their slots were full are asked again."""
        for queue in self._full.intersection(queues):
            self._full.discard(queue)
            self._until.pop(queue, None)

    def jobs_arrived(self) -> None:
        """Jobs were announced: every dry queue, every full one and every one whose key walk
        found each key spent is asked again (new jobs may bring free keys)."""
        self._dry_due.clear()
        self._dry.clear()
        self._fruitless.clear()
        for queue in self._walked_out:
            self._until.pop(queue, None)
        self._walked_out.clear()
        self.slots_freed(self._full)

    def settings_changed(self) -> None:
        """Some queue's settings changed (a notification): every rest ends."""
        self._until.clear()
        self._full.clear()
        self._keys_until.clear()
        self.jobs_arrived()

    def forget(self, queue: str) -> None:
        """This queue's settings changed (seen at a read of the held queues): its rests end."""
        self._until.pop(queue, None)
        self._walked_out.discard(queue)
        self._full.discard(queue)
        self._keys_until.pop(queue, None)
        self._fruitless.pop(queue, None)
        self._dry.discard(queue)
        self._dry_due.pop(queue, None)

    def awake(self, queues: list[str], now: float) -> list[str]:
        """The queues less the dry ones that surely still rest (heard notifications, none of
        their next jobs due yet): checked as a set, not one by one, so 200 resting queues
        cost a claim nothing."""
        resting = self._dry.intersection(self._dry_due)
        if not resting or not self.listening:
            return queues
        if any(due is not None and due <= now for due in self._dry_due.values()):
            return queues  # one falls due: resting() looks at each
        self.short = True  # wakes() keeps their next due jobs in the wake-ups
        return [queue for queue in queues if queue not in resting]

    def resting(self, queue: str, now: float) -> bool:
        """Whether a queue that ran out of due jobs still rests."""
        if queue not in self._dry or queue not in self._dry_due:
            return False
        due = self._dry_due[queue]
        unheard = not self.listening and now >= self._dry_since.get(queue, 0.0) + DRY_REST_UNHEARD
        if (due is not None and now >= due) or unheard:
            self._dry.discard(queue)
            self._dry_due.pop(queue, None)
            return False
        self.short = True  # wakes() keeps its next due job in the wake-ups
        return True

    def wakes(self, next_due: Callable[[str], float | None], now: float) -> float | None:
        """When a limited queue may give more: the earliest of ``wake`` and the dry queues'
        next due jobs (``next_due`` reads one, asked once per dry spell)."""
        wakes = [self.wake] if self.wake is not None else []
        for queue in self._dry.difference(self._dry_due):
            self._dry_due[queue] = next_due(queue)
        for queue, due in list(self._dry_due.items()):
            if due is not None and due <= now:  # it fell due, or others hold it: ask again
                self._dry_due.pop(queue)
                due = now + LIMITED_RECHECK
            if due is not None:
                wakes.append(due)
        return min(wakes) if wakes else None

    def keys_resting(self, queue: str, now: float) -> bool:
        """Whether a queue's key-by-key claim found nothing a moment ago."""
        return now < self._keys_until.get(queue, 0.0)

    def keys_found_none(self, queue: str, now: float) -> None:
        """Every key with jobs is saturated: no need to walk them again at once."""
        self._keys_until[queue] = now + KEYS_IDLE_PAUSE

    def fruitless_walk(self, queue: str, now: float, timed: bool) -> None:
        """A walk of every key it looked at found each full: the queue rests, the pause
        doubling while walks find nothing where only time frees keys (key_rate). Walking
        20,000 spent keys without a pause cost an unlimited drain beside it three quarters."""
        fruitless = self._fruitless.get(queue, 0) + 1 if timed else 1
        self._fruitless[queue] = fruitless
        self.rest(queue, now + min(KEYS_IDLE_MAX, KEYS_IDLE_PAUSE * 2 ** (fruitless - 1)))
        self._walked_out.add(queue)  # ends when jobs are announced

    def fruitful(self, queue: str) -> None:
        """A claim of this queue gave jobs: its next fruitless walk pauses the least."""
        self._fruitless.pop(queue, None)
