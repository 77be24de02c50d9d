"""The statements of ``pgbeat_schedule_history`` (migration 0018) that judge periods against
their schedule's deadline, and read which schedules are late (scheduling/deadlines.py).

Split from history.py, whose claim writes what these read: a period's ``due_by`` and its
``deadline_state`` 'watching' (HISTORY_CLAIM_PERIODS).
"""

from __future__ import annotations

from typing import LiteralString

# Judges the watched periods whose due time (fire time plus deadline) has come at %(now)s:
# met when the period's job ended done by then, else late (late_at = %(now)s, late_status:
# the job's status, retrying for a pending job that has run before, or why there is no job:
# missed, buffered, missing once purged). The rows come from pgbeat_schedule_history_watching
# (a period leaves it once judged), then by primary key (= ANY of their ids; the state is
# checked again as IS NOT DISTINCT FROM, which the watched index's predicate does not match,
# so the planner cannot scan that index with the ids as a filter), each one's job
# and schedule by primary key in a subquery of its own: no join the planner could turn
# into a nested loop over two row sets. FOR UPDATE SKIP LOCKED lets replicas judge side by
# side, and the update takes a row only while it is still watching, so each period is
# judged once whatever the number of replicas. For each late period of a live schedule with
# on_late, the one alert job of kind on_late, keyed
# '<period key>:late' (jobs_unique: a second insert would do nothing). Returns the judged
# periods, then a row per alert (state 'alert', its period and job id): two lists rather
# than a join of two CTEs, which the planner may run as a nested loop (quadratic).
HISTORY_JUDGE_DEADLINES: LiteralString = """
WITH due AS (
    SELECT h.id FROM pgbeat_schedule_history AS h
    WHERE h.deadline_state = 'watching' AND h.due_by <= %(now)s
    ORDER BY h.due_by
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), judged AS (
    UPDATE pgbeat_schedule_history AS h
    SET (deadline_state, late_at, late_status) = (
        SELECT CASE WHEN v.met THEN 'met' ELSE 'late' END,
               CASE WHEN v.met THEN NULL ELSE %(now)s::timestamptz END,
               CASE WHEN v.met THEN NULL
                    WHEN v.found IS NULL AND h.outcome IN ('missed', 'buffered') THEN h.outcome
                    WHEN v.found IS NULL THEN 'missing'
                    WHEN v.status = 'pending' AND v.attempts > 0 THEN 'retrying'
                    ELSE v.status END
        FROM (SELECT j.id AS found, j.status, j.attempts,
                     coalesce(j.status = 'done' AND j.finished_at <= h.due_by, false) AS met
              FROM (SELECT) AS one LEFT JOIN jobs AS j ON j.id = h.job_id) AS v)
    WHERE h.id = ANY (ARRAY(SELECT id FROM due))
      AND h.deadline_state IS NOT DISTINCT FROM 'watching'
    RETURNING h.schedule, h.fire_at, h.due_by, h.job_id, h.deadline_state, h.late_status,
              h.schedule || '@'
                  || to_char(h.fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                  AS period
), alerts AS (
    INSERT INTO jobs AS j (kind, payload, unique_key)
    SELECT a.kind,
           jsonb_build_object('schedule', a.schedule, 'period', a.period,
                              'fire_time', split_part(a.period, '@', 2),
                              'job_id', a.job_id, 'status', a.late_status,
                              'due_by', to_char(a.due_by AT TIME ZONE 'UTC',
                                                'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
           a.period || ':late'
    FROM (
        SELECT l.*, (SELECT s.on_late FROM pgbeat_schedules AS s
                     WHERE s.name = l.schedule AND s.deleted_at IS NULL) AS kind
        FROM judged AS l WHERE l.deadline_state = 'late'
    ) AS a
    WHERE a.kind IS NOT NULL
    ORDER BY a.schedule, a.fire_at
    ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING j.id, j.unique_key
)
SELECT l.schedule, l.fire_at, l.deadline_state, l.late_status, l.job_id, l.period,
       NULL::bigint AS alert_job_id
FROM judged AS l
UNION ALL
SELECT NULL, NULL, 'alert', NULL, NULL, left(a.unique_key, -5), a.id FROM alerts AS a"""

# The earliest due time of a period still watched after %(now)s, for the loop's next
# judging (the first entry of pgbeat_schedule_history_watching past it).
HISTORY_NEXT_DUE: LiteralString = """
SELECT min(due_by) FROM pgbeat_schedule_history
WHERE deadline_state = 'watching' AND due_by > %(now)s"""

# The live schedules with a deadline whose latest judged period is late, or whose latest
# period was due before %(overdue)s and is not judged yet (no replica judging): per schedule, its
# newest periods back to the first judged or overdue one (pgbeat_schedule_history_period).
# A later period that met its deadline clears the schedule; its late periods stay late in
# its history.
HISTORY_LATE_SCHEDULES: LiteralString = """
SELECT s.name AS schedule, v.fire_at, v.due_by, v.late_at, v.late_status, v.job_id,
       v.deadline_state
FROM pgbeat_schedules AS s
CROSS JOIN LATERAL (
    SELECT h.fire_at, h.due_by, h.late_at, h.late_status, h.job_id, h.deadline_state
    FROM pgbeat_schedule_history AS h
    WHERE h.schedule = s.name AND h.outcome <> 'manual'
      AND (h.deadline_state IN ('met', 'late') OR h.due_by <= %(overdue)s)
    ORDER BY h.fire_at DESC
    LIMIT 1
) AS v
WHERE s.deleted_at IS NULL AND s.deadline IS NOT NULL AND v.deadline_state <> 'met'
ORDER BY s.name"""
