-- Layer 3: the rules of single values, on the domains of migration 00035
-- (amounts, currencies, names of flows and recovery points, statuses, ...):
-- planned once a connection, evaluated for each value written.
DO $$
DECLARE r record;
BEGIN
    FOR r IN
        SELECT t.typname, c.conname
        FROM pg_constraint AS c
        JOIN pg_type AS t ON t.oid = c.contypid
        WHERE t.typnamespace = 'public'::regnamespace
    LOOP
        EXECUTE format('ALTER DOMAIN %I DROP CONSTRAINT %I', r.typname, r.conname);
    END LOOP;
END $$;
