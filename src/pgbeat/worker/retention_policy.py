"""How long finished jobs are kept, and what one retention round asks the database to delete.

Pure: the worker's flags and settings become a ``RetentionPolicy``; the service in
``retention.py`` runs its passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pgbeat.durations import format_duration, parse_duration

DEFAULT_RETENTION = timedelta(days=7)  # done and cancelled jobs
DEFAULT_FAILED_RETENTION = timedelta(days=30)  # failed jobs: the dead letter, kept longer
DEFAULT_EVERY = timedelta(seconds=10)  # between two looks for the turn (and the holder's rounds)
DEFAULT_BATCH = 1000  # rows per DELETE: short locks, short WAL bursts
OFF = "off"


def parse_retention(text: str) -> timedelta | None:
    """A retention flag's value: a duration, or ``off`` (None: keep forever)."""
    if text.strip().lower() == OFF:
        return None
    return parse_duration(text)


def format_retention(value: timedelta | None) -> str:
    """The flag's spelling of ``value``, read back by ``parse_retention``."""
    return OFF if value is None else format_duration(value)


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep done and cancelled jobs ``retention``, failed ones ``failed_retention``.

    None keeps them forever. ``every`` is how often a worker looks for the turn (and its
    holder runs a round); the turn is held for ``hold()`` and renewed before each batch.
    """

    retention: timedelta | None = DEFAULT_RETENTION
    failed_retention: timedelta | None = DEFAULT_FAILED_RETENTION
    every: timedelta = DEFAULT_EVERY
    batch: int = DEFAULT_BATCH

    def __post_init__(self) -> None:
        for name in ("retention", "failed_retention"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, timedelta):
                raise TypeError(f"{name} must be a timedelta or None, got {type(value).__name__}")
            if value is not None and value <= timedelta(0):
                raise ValueError(f"{name} must be positive (or None: off), got {value}")
        if not isinstance(self.every, timedelta) or self.every <= timedelta(0):
            raise ValueError(f"retention every must be a positive timedelta, got {self.every!r}")
        if not isinstance(self.batch, int) or self.batch < 1:
            raise ValueError(f"retention batch must be at least 1, got {self.batch!r}")

    @property
    def enabled(self) -> bool:
        return self.retention is not None or self.failed_retention is not None

    def passes(self) -> list[tuple[tuple[str, ...], timedelta]]:
        """(statuses, older than) for each delete a round makes; none when all is off."""
        found: list[tuple[tuple[str, ...], timedelta]] = []
        if self.retention is not None:
            found.append((("done", "cancelled"), self.retention))
        if self.failed_retention is not None:
            found.append((("failed",), self.failed_retention))
        return found

    def hold(self) -> timedelta:
        """How long a taken turn lasts unrenewed: three rounds, so one slow round keeps it,
        and a holder killed without a word is replaced within about three rounds."""
        return self.every * 3

    def round_budget(self) -> timedelta:
        """How long one round may delete before it yields (it goes on at the next round)."""
        return min(self.every, timedelta(seconds=30))
