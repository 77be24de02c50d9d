"""Claimed rows as Jobs: the columns picked by name, each row decoded alone, so one row
Python cannot read (a date outside years 1-9999, a payload nested too deeply) fails alone
while the rest of the batch runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import psycopg

from pgbeat.job import Job

_UNREADABLE = (ValueError, TypeError, OverflowError, RecursionError)
_decode_json = json.JSONDecoder().decode


def decode_payload(text: str) -> Any:
    """A claimed payload: ``{}`` (the default, and most scheduled jobs) without parsing."""
    return {} if text == "{}" else _decode_json(text)


# Per claim statement and column names, the picker of those columns: a statement's columns
# never change, and a result's description is built anew at each access (a Column object
# per column), so it is read once per statement, not per claim.
_PICKERS: dict[tuple[str, tuple[str, ...]], itemgetter[Any]] = {}
# The (statement, names) whose rows are those columns already, in that order and no more:
# their rows need no picking (0.2 us a row of a claim; the plain claims return Job's).
_AS_PICKED: set[tuple[str, tuple[str, ...]]] = set()


def columns(statement: str, cursor: psycopg.Cursor[Any], names: tuple[str, ...]) -> itemgetter[Any]:
    """Picks ``names``, in that order, by name out of the rows ``statement`` gave ``cursor``."""
    pick = _PICKERS.get((statement, names))
    if pick is None:
        description = cursor.description
        assert description is not None
        where = {column.name: i for i, column in enumerate(description)}
        pick = _PICKERS[statement, names] = itemgetter(*(where[name] for name in names))
        if tuple(column.name for column in description) == names:
            _AS_PICKED.add((statement, names))
    return pick


def job_columns(statement: str, cursor: psycopg.Cursor[Any]) -> itemgetter[Any]:
    """Picks Job's fields, in Job's order, by name out of the rows of a claim's ``cursor``
    (every claim returns claim_parts._CLAIMED_COLUMNS, limited claims more after them)."""
    return columns(statement, cursor, Job._fields)


_RUN_AT, _CREATED_AT = Job._fields.index("run_at"), Job._fields.index("created_at")
_FIELDS = len(Job._fields)
_make_tuple = tuple.__new__  # a Job from all its fields, without NamedTuple's __new__ in Python


def decode_row(values: Sequence[Any]) -> Job:
    """One claimed row, its columns in Job's order (job_columns), as a Job; ``ValueError``
    (or the decoder's error) when unreadable.

    Dates come NULL when outside years 1-9999 (the claim's CASE), the payload as text.
    """
    if values[_RUN_AT] is None:
        raise ValueError("its run_at is outside the years 1-9999 that Python can hold")
    if values[_CREATED_AT] is None:
        raise ValueError("its created_at is outside the years 1-9999 that Python can hold")
    fields = list(values)
    fields[2] = decode_payload(fields[2])
    if len(fields) == _FIELDS:  # a claim's row: 290 ns a row against 500 through Job(...)
        return _make_tuple(Job, fields)
    return Job(*fields)


def decode_rows(rows: Sequence[Sequence[Any]]) -> tuple[list[Job], list[tuple[int, str]]]:
    """The readable rows as Jobs, and (id, reason) for each row that could not be read."""
    try:
        return [decode_row(row) for row in rows], []  # the usual batch: every row readable
    except _UNREADABLE:
        pass
    jobs: list[Job] = []
    unreadable: list[tuple[int, str]] = []
    for row in rows:
        try:
            jobs.append(decode_row(row))
        except _UNREADABLE as exc:
            reason = "payload nested too deeply" if isinstance(exc, RecursionError) else exc
            unreadable.append((int(row[0]), f"the worker could not read this job: {reason}"))
    return jobs, unreadable


def fetch_jobs(statement: str, cursor: psycopg.Cursor[Any]) -> list[Any]:
    """The rows ``statement`` (a claim) gave ``cursor``, their columns picked in Job's order
    by name."""
    rows = cursor.fetchall()
    if not rows:
        return rows
    pick = job_columns(statement, cursor)
    return rows if (statement, Job._fields) in _AS_PICKED else list(map(pick, rows))
