"""schedules.toml text to validated ``Schedule`` objects, with one precise line per mistake.

Every problem in a file is collected, each naming the file, the schedule and the key,
so a scheduler never starts on a bad file. Pure except ``load_schedules``, which reads it.
"""

from __future__ import annotations

import difflib
import re
import reprlib
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from pgbeat.errors import ConfigError
from pgbeat.scheduling.lateness import deadline_problem
from pgbeat.scheduling.schedule import Schedule

# The schedule's name is its table key ([schedules.NAME]), never a key inside it.
_SCHEDULE_KEYS = frozenset(Schedule.model_fields) - {"name"}
_PER_SCHEDULE_KEYS = frozenset({"cron", "every", "kind"})
_DEFAULT_KEYS = _SCHEDULE_KEYS - _PER_SCHEDULE_KEYS
_TOP_LEVEL_KEYS = frozenset({"defaults", "schedules"})
# Lets [defaults] be validated on its own, before it is merged into each schedule.
_DEFAULTS_PROBE = {"name": "defaults", "kind": "defaults", "every": "1h"}
_TOML_POSITION = re.compile(r"(.*) \(at (?:line (\d+), column \d+|end of document)\)", re.DOTALL)
_TOML_DUPLICATE = re.compile(r"Cannot declare \('schedules', '(.*)'\) twice")
_SHORT = reprlib.Repr()
_SHORT.maxstring = 40


def load_schedules(path: str | Path) -> list[Schedule]:
    """Read and validate a schedules.toml file; raise ``ConfigError`` on any problem."""
    try:
        # utf-8-sig: editors on Windows may prepend a byte-order mark.
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except UnicodeDecodeError as error:
        raise ConfigError([f"{path}: not UTF-8 text (byte {error.start})"]) from None
    except OSError as error:
        raise ConfigError([f"{path}: cannot read file: {error.strerror or error}"]) from None
    return parse_schedules(text, source=str(path))


def parse_schedules(text: str, source: str = "schedules.toml") -> list[Schedule]:
    """Validate schedules.toml text; return schedules sorted by name or raise ``ConfigError``."""
    document = _parse_toml(text, source)
    problems = [f"top level: {p}" for p in _unknown_keys(document, _TOP_LEVEL_KEYS)]
    defaults, default_problems = _defaults(document.get("defaults", {}))
    schedules, schedule_problems = _schedules(document.get("schedules", {}), defaults)
    problems += default_problems + schedule_problems
    if problems:
        raise ConfigError([f"{source}: {problem}" for problem in problems])
    return sorted(schedules, key=lambda schedule: schedule.name)


def build_schedule(name: str, values: dict[str, Any]) -> Schedule:
    """One schedule given in code (``pgbeat.upsert_schedule``), validated as a file's is.

    ``values`` are the keys of a ``[schedules.NAME]`` table; ``kind`` defaults to the name.
    Raises ``ConfigError`` with one line per problem, worded as for a schedules file.
    """
    schedule, problems = _schedule(name, values, {})
    if schedule is None or problems:
        raise ConfigError([f"schedule {_label(name)}: {problem}" for problem in problems])
    return schedule


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([f"{source}: {_toml_problem(str(error))}"]) from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise ConfigError([f"{source}: arrays or inline tables nested too deeply"]) from None


def _toml_problem(message: str) -> str:
    """tomllib's "msg (at line N, column M)" as "line N: msg"."""
    match = _TOML_POSITION.fullmatch(message)
    if match is None:
        return message
    message, line = match.groups()
    duplicate = _TOML_DUPLICATE.fullmatch(message)
    if duplicate is not None:
        message = f"schedule {duplicate.group(1)!r} is defined twice"
    return f"{'end of file' if line is None else f'line {line}'}: {message}"


def _defaults(table: object) -> tuple[dict[str, Any], list[str]]:
    """The usable [defaults] keys and the problems with the others."""
    if not isinstance(table, dict):
        return {}, [f"defaults: must be a table ([defaults]), got {_show(table)}"]
    problems = [
        f"{key}: cannot be a default, set it in each schedule"
        for key in table
        if key in _PER_SCHEDULE_KEYS
    ]
    problems += _unknown_keys(
        {key: value for key, value in table.items() if key not in _PER_SCHEDULE_KEYS},
        _DEFAULT_KEYS,
    )
    usable = {key: value for key, value in table.items() if key in _DEFAULT_KEYS}
    _, errors = _validate({**usable, **_DEFAULTS_PROBE})
    problems += [_describe(error) for error in errors]
    # A bad default is reported once here, not again in every schedule that inherits it.
    invalid = {error["loc"][0] for error in errors if error["loc"]}
    valid = {key: value for key, value in usable.items() if key not in invalid}
    return valid, [f"defaults: {problem}" for problem in problems]


def _schedules(table: object, defaults: dict[str, Any]) -> tuple[list[Schedule], list[str]]:
    """Each [schedules.NAME] table merged over the defaults and validated."""
    if not isinstance(table, dict):
        return [], [f"schedules: must be [schedules.NAME] tables, got {_show(table)}"]
    schedules: list[Schedule] = []
    problems: list[str] = []
    for name, entry in table.items():
        schedule, found = _schedule(name, entry, defaults)
        problems += [f"schedule {_label(name)}: {problem}" for problem in found]
        if schedule is not None:
            schedules.append(schedule)
    return schedules, problems


def _schedule(
    name: str, table: object, defaults: dict[str, Any]
) -> tuple[Schedule | None, list[str]]:
    if not isinstance(table, dict):
        shown = name if name.isprintable() else repr(name)  # a problem stays one line
        return None, [f"must be a table ([schedules.{shown}]), got {_show(table)}"]
    problems = _unknown_keys(table, _SCHEDULE_KEYS)
    known = {key: value for key, value in table.items() if key in _SCHEDULE_KEYS}
    data = {"kind": name, **defaults, **known, "name": name}
    schedule, errors = _validate(data)
    problems += [_describe(error) for error in errors]
    late_problem = None if schedule is None else deadline_problem(schedule)
    if late_problem is not None:
        problems.append(late_problem)
    return (None, problems) if problems else (schedule, [])


def _validate(data: dict[str, Any]) -> tuple[Schedule | None, list[ErrorDetails]]:
    try:
        return Schedule.model_validate(data), []
    except ValidationError as error:
        return None, error.errors()


def _describe(error: ErrorDetails) -> str:
    """One pydantic error as one line: "key: what is wrong"."""
    cause = error.get("ctx", {}).get("error")
    if error["type"] == "value_error" and cause is not None:
        message = str(cause)  # our validators' own words, without "Value error, "
    else:
        message = f"{error['msg'][:1].lower()}{error['msg'][1:]}, got {_show(error['input'])}"
    key = ".".join(str(part) for part in error["loc"])
    return f"{key}: {message}" if key else message


def _unknown_keys(table: dict[str, Any], allowed: Iterable[str]) -> list[str]:
    names = sorted(allowed)
    return [f"unknown key {key!r}{_hint(key, names)}" for key in table if key not in names]


def _hint(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (expected one of: {', '.join(allowed)})"


def _show(value: object) -> str:
    return _SHORT.repr(value)


def _label(name: str) -> str:
    """A schedule's name in a problem line: a 10,000-character name must not fill the screen."""
    return repr(name) if len(name) <= 80 else f"{name[:40]!r}... ({len(name)} characters)"
