"""Random Vixie cron expressions, biased to fixed times in 00:00-04:00 and stepped day fields."""

from __future__ import annotations

import random
from collections.abc import Callable

# What Debian's cron sets for each shortcut (entry.c), written out as five fields.
SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def random_expression(rng: random.Random) -> str:
    """A valid Vixie expression, biased to fixed times in 00:00-04:00 and stepped day fields."""
    if rng.random() < 0.04:
        return rng.choice(list(SHORTCUTS))
    return " ".join(
        (
            _minute(rng),
            _hour(rng),
            _day_of_month(rng),
            _month(rng),
            _day_of_week(rng),
        )
    )


def _minute(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.45, lambda: str(rng.choice((0, 15, 30, 45, rng.randrange(60))))),
        (0.15, lambda: _list(rng, 0, 59)),
        (0.10, lambda: _stepped_range(rng, 0, 59)),
        (0.15, lambda: f"*/{rng.choice((5, 10, 15, 20, 30, rng.randrange(1, 61)))}"),
        (0.15, lambda: "*"),
    )


def _hour(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.45, lambda: str(rng.randrange(0, 5))),
        (0.15, lambda: ",".join(map(str, sorted(rng.sample(range(0, 5), rng.randrange(2, 4)))))),
        (0.10, lambda: f"{rng.randrange(0, 3)}-{rng.randrange(3, 5)}"),
        (0.05, lambda: _stepped_range(rng, 0, 23)),
        (0.10, lambda: f"*/{rng.randrange(1, 8)}"),
        (0.10, lambda: "*"),
        (0.05, lambda: str(rng.randrange(24))),
    )


def _day_of_month(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.35, lambda: "*"),
        (0.25, lambda: f"*/{rng.randrange(2, 16)}"),
        (0.10, lambda: _stepped_range(rng, 1, 31)),
        (0.15, lambda: _list(rng, 1, 31)),
        (0.15, lambda: str(rng.randrange(1, 32))),
    )


def _month(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.70, lambda: "*"),
        (0.10, lambda: ",".join(_case(rng, m) for m in sorted(rng.sample(MONTH_NAMES, 2)))),
        (0.10, lambda: f"{_case(rng, MONTH_NAMES[rng.randrange(6)])}-{rng.randrange(7, 13)}"),
        (0.10, lambda: f"*/{rng.randrange(2, 7)}"),
    )


def _day_of_week(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.45, lambda: "*"),
        (0.20, lambda: f"*/{rng.randrange(2, 5)}"),
        (0.05, lambda: f"{_case(rng, 'mon')}-{_case(rng, 'fri')}"),
        (0.05, lambda: f"{rng.randrange(0, 4)}-{rng.randrange(4, 8)}"),
        (0.05, lambda: _stepped_range(rng, 0, 7)),
        (0.15, lambda: ",".join(_day_names(rng))),
        (0.05, lambda: "7"),
    )


def _day_names(rng: random.Random) -> list[str]:
    days = sorted(rng.sample(range(8), rng.randrange(1, 4)))
    return [_case(rng, DAY_NAMES[d % 7]) if rng.random() < 0.5 else str(d) for d in days]


def _list(rng: random.Random, low: int, high: int) -> str:
    """A list mixing numbers, ranges and stepped ranges, e.g. ``1,5-9,20-40/7``."""
    items = []
    for _ in range(rng.randrange(2, 4)):
        first = rng.randrange(low, high + 1)
        kind = rng.random()
        if kind < 0.5:
            items.append(str(first))
        else:
            last = rng.randrange(first, high + 1)
            step = f"/{rng.randrange(2, 8)}" if kind < 0.75 else ""
            items.append(f"{first}-{last}{step}")
    return ",".join(items)


def _stepped_range(rng: random.Random, low: int, high: int) -> str:
    first = rng.randrange(low, high + 1)
    last = rng.randrange(first, high + 1)
    return f"{first}-{last}/{rng.randrange(1, max(2, (high - low) // 2))}"


def _case(rng: random.Random, name: str) -> str:
    return rng.choice((name, name.upper(), name.title()))


def _pick(rng: random.Random, *choices: tuple[float, Callable[[], str]]) -> str:
    roll = rng.random()
    for weight, make in choices:
        if roll < weight:
            return make()
        roll -= weight
    return choices[-1][1]()
