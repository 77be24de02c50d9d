-- Several apps in one database: each `pgbeat migrate --schema NAME` installs these tables
-- in its own schema, but NOTIFY channels and advisory locks are the whole database's. They
-- are named after the schema here, once: `public` keeps the names it always had (an install
-- there upgrades without a change), any other schema gets names of its own.

-- The channel `base` of `schema_name`: base itself in public, else 'base:schema' (a schema
-- too long for a channel's 63 bytes gives its md5 instead).
CREATE OR REPLACE FUNCTION pgbeat_channel(base text, schema_name text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN schema_name = 'public' THEN base
                WHEN octet_length(base || ':' || schema_name) <= 63 THEN base || ':' || schema_name
                ELSE base || ':' || md5(schema_name) END
$$;

-- The channel `base` of the session's schema (the first on search_path), for statements.
CREATE OR REPLACE FUNCTION pgbeat_channel(base text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT pgbeat_channel(base, current_schema())
$$;

-- LISTEN / UNLISTEN the channel `base` of the session's schema; returns the channel's name
-- (what a notification's channel then is).
CREATE OR REPLACE FUNCTION pgbeat_listen(base text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    channel text := pgbeat_channel(base);
BEGIN
    EXECUTE format('LISTEN %I', channel);
    RETURN channel;
END;
$$;

CREATE OR REPLACE FUNCTION pgbeat_unlisten(base text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    channel text := pgbeat_channel(base);
BEGIN
    EXECUTE format('UNLISTEN %I', channel);
    RETURN channel;
END;
$$;

-- The advisory lock key `base` of the session's schema: base itself in public, else a
-- hash of the schema's name seeded with it (distinct per schema and per base).
CREATE OR REPLACE FUNCTION pgbeat_lock_key(base bigint) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN current_schema() = 'public' THEN base
                ELSE hashtextextended(current_schema(), base) END
$$;

-- The triggers notify the channel of their table's schema (TG_TABLE_SCHEMA), whatever the
-- inserting session's search_path; the name is pgbeat_channel's, written out so that the
-- trigger never looks a function up through that search_path.
CREATE OR REPLACE FUNCTION pgbeat_notify_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(CASE WHEN TG_TABLE_SCHEMA = 'public' THEN 'pgbeat_jobs'
                           WHEN octet_length(TG_TABLE_SCHEMA) <= 51
                               THEN 'pgbeat_jobs:' || TG_TABLE_SCHEMA
                           ELSE 'pgbeat_jobs:' || md5(TG_TABLE_SCHEMA) END, '');
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION pgbeat_schedules_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(CASE WHEN TG_TABLE_SCHEMA = 'public' THEN 'pgbeat_schedules'
                           WHEN octet_length(TG_TABLE_SCHEMA) <= 46
                               THEN 'pgbeat_schedules:' || TG_TABLE_SCHEMA
                           ELSE 'pgbeat_schedules:' || md5(TG_TABLE_SCHEMA) END, '');
    RETURN NULL;
END;
$$;
