"""Missing tables, said as pgbeat says it: an API call on a database that ``pgbeat migrate``
has not set up raises ``NotMigrated`` instead of psycopg's UndefinedTable.

The error is caught and translated, never checked for ahead: an enqueue costs no extra
round trip.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import psycopg

from pgbeat.errors import NotMigrated

P = ParamSpec("P")
T = TypeVar("T")


def _not_migrated(error: psycopg.Error) -> NotMigrated:
    return NotMigrated(
        f"pgbeat's tables are missing or out of date ({error.diag.message_primary}): "
        "run `pgbeat migrate` (or pgbeat.apply_migrations) first"
    )


# What a statement of pgbeat's meets on a database its migrations have not (all) reached:
# a table, a column or one of its functions (pgbeat_listen, pgbeat_channel, ...) missing.
_SCHEMA_ERRORS = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.UndefinedFunction,
)


def translate(function: Callable[P, T]) -> Callable[P, T]:
    """Wrap an API call so that a missing table or column raises ``NotMigrated``."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def awaited(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                return await function(*args, **kwargs)
            except _SCHEMA_ERRORS as error:
                raise _not_migrated(error) from error

        return cast(Callable[P, T], awaited)

    @functools.wraps(function)
    def called(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        except _SCHEMA_ERRORS as error:
            raise _not_migrated(error) from error

    return called
