"""A used test database made fresh again in place, when only its rows changed.

Creating a database from the template and dropping it afterwards cost a short test most of
its time, and on a busy server far more: DROP DATABASE waits for a checkpoint, and the
clone writes the whole template into the WAL. Most tests change rows only; their database
is emptied (TRUNCATE of the tables it wrote to), given back the rows the template holds and
its sequences' positions, its statistics reset, and handed to the next test.

A database is reused only when nothing but rows changed: no connection left to it, no
prepared transaction, and a fingerprint of its catalogs (objects, definitions, owners,
grants, settings, planner statistics) equal to a fresh clone's. Anything else (a schema
migrated, a trigger added, a role granted, an ANALYZE) and it is dropped as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg import sql

# One text of everything a test could change beyond rows, for objects created after initdb
# (oid >= 16384) and the database's own settings. Volatile columns (relfilenode, relpages,
# reltuples, frozen xids) are left out: TRUNCATE changes them, and a fresh clone's are the
# template's.
FINGERPRINT: LiteralString = """
SELECT md5(concat_ws('|',
  (SELECT string_agg(concat_ws(',', c.oid, c.relname, c.relnamespace, c.relkind, c.relowner,
                               c.relacl, c.reloptions, c.relrowsecurity, c.relforcerowsecurity,
                               c.relpersistence, c.relispartition,
                               CASE WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) END),
                     ';' ORDER BY c.oid)
     FROM pg_class AS c WHERE c.oid >= 16384),
  (SELECT string_agg(concat_ws(',', a.attrelid, a.attnum, a.attname, a.atttypid, a.attnotnull,
                               a.attisdropped, a.attacl, a.attoptions, a.attidentity,
                               a.attgenerated, pg_get_expr(d.adbin, d.adrelid)),
                     ';' ORDER BY a.attrelid, a.attnum)
     FROM pg_attribute AS a
     LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid >= 16384 AND a.attnum > 0),
  (SELECT string_agg(concat_ws(',', oid, conname, convalidated, pg_get_constraintdef(oid)),
                     ';' ORDER BY oid) FROM pg_constraint WHERE oid >= 16384),
  (SELECT string_agg(concat_ws(',', oid, proname, pronamespace, proowner, proacl, proconfig,
                               prosecdef, provolatile, md5(prosrc)), ';' ORDER BY oid)
     FROM pg_proc WHERE oid >= 16384),
  (SELECT string_agg(concat_ws(',', oid, tgname, tgrelid, tgfoid, tgenabled), ';' ORDER BY oid)
     FROM pg_trigger WHERE oid >= 16384),
  (SELECT string_agg(concat_ws(',', oid, nspname, nspowner, nspacl), ';' ORDER BY oid)
     FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_temp\\_%'
                         AND nspname NOT LIKE 'pg\\_toast\\_temp\\_%'),
  (SELECT string_agg(concat_ws(',', oid, polname, polrelid, polcmd, polroles,
                               pg_get_expr(polqual, polrelid),
                               pg_get_expr(polwithcheck, polrelid)), ';' ORDER BY oid)
     FROM pg_policy),
  (SELECT string_agg(concat_ws(',', oid, typname, typowner, typacl), ';' ORDER BY oid)
     FROM pg_type WHERE oid >= 16384),
  (SELECT string_agg(concat_ws(',', oid, rulename, ev_class), ';' ORDER BY oid)
     FROM pg_rewrite WHERE oid >= 16384),
  (SELECT string_agg(concat_ws(',', seqrelid, seqtypid, seqstart, seqincrement, seqmax, seqmin,
                               seqcache, seqcycle), ';' ORDER BY seqrelid) FROM pg_sequence),
  (SELECT string_agg(concat_ws(',', objoid, classoid, objsubid, md5(description)), ';'
                     ORDER BY objoid, classoid, objsubid)
     FROM pg_description WHERE objoid >= 16384),
  (SELECT string_agg(concat_ws(',', setrole, setconfig), ';' ORDER BY setrole)
     FROM pg_db_role_setting
     WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())),
  (SELECT concat_ws(',', datdba, datacl, datconnlimit, datallowconn, datistemplate)
     FROM pg_database WHERE datname = current_database()),
  (SELECT string_agg(concat_ws(',', oid, evtname, evtenabled), ';' ORDER BY oid)
     FROM pg_event_trigger),
  (SELECT string_agg(concat_ws(',', oid, extname, extversion), ';' ORDER BY oid)
     FROM pg_extension),
  (SELECT string_agg(concat_ws(',', oid, defaclrole, defaclacl), ';' ORDER BY oid)
     FROM pg_default_acl),
  (SELECT count(*) FROM pg_publication),
  (SELECT count(*) FROM pg_largeobject_metadata),
  (SELECT count(*) FROM pg_statistic WHERE starelid >= 16384),
  (SELECT count(*) FROM pg_statistic_ext WHERE oid >= 16384)
))"""

# The tables to empty (partitioned ones included: TRUNCATE reaches their partitions).
TABLES: LiteralString = """
SELECT n.nspname, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY c.oid"""

# The foreign keys between tables: (referencing, referenced), each as (schema, name).
FOREIGN_KEYS: LiteralString = """
SELECT cn.nspname, c.relname, pn.nspname, p.relname
FROM pg_constraint AS k
JOIN pg_class AS c ON c.oid = k.conrelid JOIN pg_namespace AS cn ON cn.oid = c.relnamespace
JOIN pg_class AS p ON p.oid = k.confrelid JOIN pg_namespace AS pn ON pn.oid = p.relnamespace
WHERE k.contype = 'f' AND k.oid >= 16384"""

# The tables a test may have written to: those whose files are not empty.
WRITTEN: LiteralString = """
SELECT n.nspname, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND (c.relkind = 'p' OR pg_relation_size(c.oid) > 0)
ORDER BY c.oid"""

# Kinds of relation whose contents a TRUNCATE would not make fresh: a database holding one
# is never reused.
UNRESETTABLE: LiteralString = "SELECT count(*) FROM pg_class WHERE oid >= 16384 AND relkind = 'm'"

# Each sequence's position, to put back (a fresh clone's are the template's).
SEQUENCES: LiteralString = """
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), s.last_value, s.is_called
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace,
     LATERAL pg_sequence_last_value(c.oid) AS lv(v),
     LATERAL (SELECT coalesce(lv.v, q.seqstart) AS last_value, lv.v IS NOT NULL AS is_called
              FROM pg_sequence AS q WHERE q.seqrelid = c.oid) AS s
WHERE c.relkind = 'S' AND c.oid >= 16384"""

# Other sessions on the database or transactions prepared in it: it is still in use.
IN_USE: LiteralString = """
SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = %(name)s AND pid <> pg_backend_pid())
     + (SELECT count(*) FROM pg_prepared_xacts WHERE database = %(name)s)"""


Table = tuple[str, str]  # schema, name


@dataclass(frozen=True)
class Fresh:
    """What a fresh clone of the template looks like: its fingerprint, its tables, the rows
    the template holds (COPY text by table) and its sequences' positions."""

    fingerprint: str
    rows: dict[Table, bytes]  # the template's rows, of the tables that have any
    references: list[tuple[Table, Table]]  # foreign keys: (referencing, referenced)
    sequences: list[tuple[str, int, bool]]

    @classmethod
    def read(cls, url: str) -> Fresh | None:
        """The look of the fresh database at ``url``; None if it cannot be reset in place."""
        with psycopg.connect(url, autocommit=True) as conn:
            if _scalar(conn, UNRESETTABLE):
                return None
            rows = {}
            for row in conn.execute(TABLES):
                table = (str(row[0]), str(row[1]))
                if copied := _rows(conn, table):
                    rows[table] = copied
            references = [((r[0], r[1]), (r[2], r[3])) for r in conn.execute(FOREIGN_KEYS)]
            sequences = [(str(r[0]), int(r[1]), bool(r[2])) for r in conn.execute(SEQUENCES)]
            return cls(str(_scalar(conn, FINGERPRINT)), rows, references, sequences)


def reset(admin: psycopg.Connection[Any], url: str, name: str, fresh: Fresh) -> bool:
    """Make database ``name`` (at ``url``) look fresh again if only its rows changed;
    whether it did (if not, the caller drops it)."""
    if not _unused(admin, name):
        return False
    with psycopg.connect(url, autocommit=True) as conn:
        if _scalar(conn, FINGERPRINT) != fresh.fingerprint:
            return False
        used = _to_empty(conn, fresh)
        with conn.transaction():
            if used:  # the untouched tables keep their files: fewer to create and sync
                names = sql.SQL(", ").join(sql.Identifier(*table) for table in sorted(used))
                conn.execute(sql.SQL("TRUNCATE {}").format(names))
            conn.execute("SET LOCAL session_replication_role = replica")  # rows as they were
            for table in sorted(used & fresh.rows.keys()):
                with conn.cursor().copy(
                    sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(*table))
                ) as cp:
                    cp.write(fresh.rows[table])
            for sequence, last_value, is_called in fresh.sequences:
                conn.execute(
                    "SELECT setval(%s::regclass, %s, %s)", (sequence, last_value, is_called)
                )
        conn.execute("SELECT pg_stat_reset()")
    return _unused(admin, name)  # the next test finds no session of ours either


def _to_empty(conn: psycopg.Connection[Any], fresh: Fresh) -> set[Table]:
    """The tables whose rows are not the template's, with every table referencing one of
    them (TRUNCATE takes those too)."""
    found = {(str(r[0]), str(r[1])) for r in conn.execute(WRITTEN)}
    found = {t for t in found if t not in fresh.rows or _rows(conn, t) != fresh.rows[t]}
    grown = True
    while grown:
        more = {child for child, parent in fresh.references if parent in found} - found
        found |= more
        grown = bool(more)
    return found


def _rows(conn: psycopg.Connection[Any], table: Table) -> bytes:
    """A table's rows as COPY writes them."""
    copied = bytearray()
    with conn.cursor().copy(sql.SQL("COPY {} TO STDOUT").format(sql.Identifier(*table))) as cp:
        for chunk in cp:
            copied += chunk
    return bytes(copied)


def _unused(admin: psycopg.Connection[Any], name: str) -> bool:
    """Whether database ``name`` has no session and no prepared transaction, waiting up to
    2 s for closed sessions to exit (a backend ends a moment after its client closes)."""
    deadline = time.monotonic() + 2.0
    while _scalar(admin, IN_USE, {"name": name}):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _scalar(conn: psycopg.Connection[Any], query: LiteralString, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None
