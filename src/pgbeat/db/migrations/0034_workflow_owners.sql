-- Workflows get an owner: the role that inserted them. Step rows and edges may only join
-- steps of a workflow the inserting role owns (docs/reliability.md, the third pass).
--
-- Until now the enqueue role could insert step rows and edges for any job id: an edge from
-- a step of its own into another application's held step counted that step down (released
-- before its parents ended) or, its step failing, cancelled it; a step row put into another
-- workflow showed there and held its end back. 0033 kept the advance off jobs that are no
-- workflow step at all; this closes the rest:
--
-- * pgbeat_workflows.owner is the inserting role (its default, current_user; under the
--   least-privilege roles the enqueue role may insert only the name and key, so it cannot
--   name another owner); workflows made before this migration are owned by the role that
--   runs it.
-- * A statement that inserts step rows is refused when one of them names a job that is not
--   a step of that workflow (jobs.workflow_id), or a workflow the role does not own (nor is
--   a member of its owner).
-- * A statement that inserts edges is refused when an edge's parent and child are not both
--   steps of one workflow the role owns.
--
-- Both checks run once per statement over its new rows (transition tables), not per row:
-- pgbeat.enqueue_workflow inserts a workflow's steps in one statement and its edges in
-- another. They read jobs through pgbeat_workflow_foreign_step, SECURITY DEFINER (the
-- enqueue role may not read jobs.workflow_id), which is given the role to compare: inside
-- a definer function current_user is the definer, so the trigger, run as the inserting
-- role, passes its own current_user. What a role learns by calling it directly is whether
-- rows it names would be refused.
--
-- jobs.workflow_id alone is not checked (a row trigger on every insert of a step would
-- cost a fan-out's enqueue): a job that names another's workflow without a step row there
-- is no step of it, and without a step row no edge can reach it.

ALTER TABLE pgbeat_workflows ADD COLUMN IF NOT EXISTS owner name NOT NULL DEFAULT current_user;

-- Whether ``who`` may add to a workflow owned by ``owner``: the owner itself or a member of
-- it (a superuser is a member of every role); a dropped owner's workflow, nobody. One
-- expression without subqueries, so the planner inlines it into the checks' queries
-- (called as a function, each call planned its body again).
CREATE OR REPLACE FUNCTION pgbeat_workflow_owned_by(owner name, who name) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(owner = who, false)
        OR coalesce(pg_has_role(to_regrole(quote_ident(who)), to_regrole(quote_ident(owner)),
                                'MEMBER'), false)
$$;

-- The first of these step rows (job_ids[i] in workflow_ids[i]) that ``who`` may not add:
-- in no workflow, or in one that is not who's, or its job not a step of that workflow.
-- NULL: none. Each workflow's owner is looked at once (a fan-out's 10,000 steps share
-- one) and the jobs in one index scan of their primary key: the cost grows with the rows
-- added, never with the tables (no sequential scan, whatever the statistics: SET below).
CREATE OR REPLACE FUNCTION pgbeat_workflow_foreign_step(job_ids bigint[], workflow_ids bigint[],
                                                        who name) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    refused bigint[];
    job bigint;
BEGIN
    IF (SELECT count(DISTINCT id) FROM unnest(workflow_ids) AS u(id)) = 1
       AND NOT workflow_ids[1] IS NULL
       AND pgbeat_workflow_owned_by(
               (SELECT owner FROM pgbeat_workflows WHERE id = workflow_ids[1]), who)
       AND (SELECT count(*) FROM jobs WHERE id = ANY(job_ids) AND workflow_id = workflow_ids[1])
           = (SELECT count(DISTINCT id) FROM unnest(job_ids) AS u(id)) THEN
        RETURN NULL;  -- the usual statement: one workflow of who's, every job a step of it
    END IF;
    refused := ARRAY(
        SELECT d.id FROM (SELECT DISTINCT id FROM unnest(workflow_ids) AS u(id)) AS d
        LEFT JOIN pgbeat_workflows AS w ON w.id = d.id
        WHERE w.id IS NULL OR NOT pgbeat_workflow_owned_by(w.owner, who));
    SELECT s.job_id INTO job
    FROM unnest(job_ids, workflow_ids) AS s(job_id, workflow_id)
    WHERE s.workflow_id IS NULL OR s.workflow_id = ANY(refused)
    LIMIT 1;
    IF job IS NULL THEN
        SELECT s.job_id INTO job
        FROM unnest(job_ids, workflow_ids) AS s(job_id, workflow_id)
        LEFT JOIN jobs AS j ON j.id = s.job_id
        WHERE j.workflow_id IS DISTINCT FROM s.workflow_id
        LIMIT 1;
    END IF;
    RETURN job;
END;
$$;
ALTER FUNCTION pgbeat_workflow_foreign_step(bigint[], bigint[], name) SET search_path FROM CURRENT;
ALTER FUNCTION pgbeat_workflow_foreign_step(bigint[], bigint[], name) SET enable_seqscan = off;
ALTER FUNCTION pgbeat_workflow_foreign_step(bigint[], bigint[], name) SET enable_hashjoin = off;
ALTER FUNCTION pgbeat_workflow_foreign_step(bigint[], bigint[], name) SET enable_mergejoin = off;

-- The first of these edges (parents[i] -> children[i]) whose ends are not both steps of one
-- workflow ``who`` may add to: its parent's id. NULL: none. The usual statement (one
-- workflow's edges) is settled by one index scan of the ends' step rows: every end a step
-- of one workflow, which is who's. Otherwise each distinct end's workflow, as one object
-- looked up per edge by key (no join a plan could make quadratic), each workflow's owner
-- once.
CREATE OR REPLACE FUNCTION pgbeat_workflow_foreign_edge(parents bigint[], children bigint[],
                                                        who name) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    ids bigint[];
    ends jsonb;
    refused bigint[];
    edge bigint;
BEGIN
    IF (SELECT count(*) = count(DISTINCT u.id) FILTER (WHERE s.workflow_id IS NOT NULL)
               AND count(DISTINCT s.workflow_id) = 1
               AND pgbeat_workflow_owned_by(
                       (SELECT owner FROM pgbeat_workflows WHERE id = min(s.workflow_id)), who)
        FROM (SELECT DISTINCT id FROM unnest(parents || children) AS d(id)) AS u
        LEFT JOIN pgbeat_workflow_steps AS s ON s.job_id = u.id) THEN
        RETURN NULL;  -- the usual statement: every end a step of one workflow of who's
    END IF;
    ids := ARRAY(SELECT DISTINCT id FROM unnest(parents || children) AS u(id));
    SELECT coalesce(jsonb_object_agg(d.id, s.workflow_id), '{}') INTO ends
    FROM unnest(ids) AS d(id)
    LEFT JOIN pgbeat_workflow_steps AS s ON s.job_id = d.id;
    SELECT e.parent_id INTO edge
    FROM unnest(parents, children) AS e(parent_id, child_id)
    WHERE ends ->> e.child_id::text IS NULL
       OR ends ->> e.parent_id::text IS DISTINCT FROM ends ->> e.child_id::text
    LIMIT 1;
    IF edge IS NULL THEN
        refused := ARRAY(
            SELECT w.id FROM pgbeat_workflows AS w
            WHERE w.id = ANY(ARRAY(SELECT DISTINCT (v.value #>> '{}')::bigint
                                   FROM jsonb_each(ends) AS v))
              AND NOT pgbeat_workflow_owned_by(w.owner, who));
        SELECT e.parent_id INTO edge
        FROM unnest(parents, children) AS e(parent_id, child_id)
        WHERE (ends ->> e.child_id::text)::bigint = ANY(refused)
        LIMIT 1;
    END IF;
    RETURN edge;
END;
$$;
ALTER FUNCTION pgbeat_workflow_foreign_edge(bigint[], bigint[], name) SET search_path FROM CURRENT;
ALTER FUNCTION pgbeat_workflow_foreign_edge(bigint[], bigint[], name) SET enable_seqscan = off;
ALTER FUNCTION pgbeat_workflow_foreign_edge(bigint[], bigint[], name) SET enable_hashjoin = off;
ALTER FUNCTION pgbeat_workflow_foreign_edge(bigint[], bigint[], name) SET enable_mergejoin = off;

-- What a statement added to pgbeat_workflow_steps or pgbeat_workflow_edges (its transition
-- table), checked once, as the inserting role: refused in one line naming it and the job.
CREATE OR REPLACE FUNCTION pgbeat_workflow_check_added() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    refused bigint;
BEGIN
    IF TG_TABLE_NAME = 'pgbeat_workflow_steps' THEN
        SELECT pgbeat_workflow_foreign_step(array_agg(job_id), array_agg(workflow_id),
                                            current_user)
        INTO refused FROM added;
        IF refused IS NOT NULL THEN
            RAISE EXCEPTION 'pgbeat: role % may not add job % as a step: it is not a step of '
                            'a workflow this role enqueued', current_user, refused
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSE
        SELECT pgbeat_workflow_foreign_edge(array_agg(parent_id), array_agg(child_id),
                                            current_user)
        INTO refused FROM added;
        IF refused IS NOT NULL THEN
            RAISE EXCEPTION 'pgbeat: role % may not add an edge from job %: its ends are not '
                            'both steps of one workflow this role enqueued', current_user, refused
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS pgbeat_workflow_steps_owned ON pgbeat_workflow_steps;
CREATE TRIGGER pgbeat_workflow_steps_owned AFTER INSERT ON pgbeat_workflow_steps
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION pgbeat_workflow_check_added();
DROP TRIGGER IF EXISTS pgbeat_workflow_edges_owned ON pgbeat_workflow_edges;
CREATE TRIGGER pgbeat_workflow_edges_owned AFTER INSERT ON pgbeat_workflow_edges
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION pgbeat_workflow_check_added();

-- The checks resolve their functions through the search_path of this migration, not the
-- inserting role's.
ALTER FUNCTION pgbeat_workflow_check_added() SET search_path FROM CURRENT;
