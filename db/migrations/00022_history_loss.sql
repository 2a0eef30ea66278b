-- +goose Up
-- What the database can tell of its own history. A failover to a standby
-- that had not received the last commits, or a restore to a point in time,
-- goes on on a new timeline; a restore from pg_dump makes a new database
-- (a new oid). Either may have lost keys whose Stripe requests went out:
-- a client that sends such a key again more than Stripe's 24 hours later
-- reaches a Stripe that forgot the key. So the heartbeat records the
-- timeline and oid it sees, and the first time either differs from the
-- recorded one, history_lost_at; for a while after it, a fresh key is
-- looked up at Stripe before its first send (stripeonce.Rules.LostHistory).
-- A storage snapshot restored on the same timeline is not seen: the
-- failover section of docs/operations.md says what an operator does then.
ALTER TABLE deployment
    ADD COLUMN timeline        bigint,
    ADD COLUMN database_oid    bigint,
    ADD COLUMN history_lost_at timestamptz;

-- The server's timeline (its WAL file's first 8 hex digits) and the
-- database's oid. A primary's only: pg_current_wal_lsn fails on a standby.
-- +goose StatementBegin
CREATE FUNCTION paymentsd_history_seen(OUT timeline bigint, OUT database_oid bigint)
LANGUAGE sql STABLE AS $$
    SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint,
           (SELECT oid::bigint FROM pg_database WHERE datname = current_database())
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION paymentsd_history_seen();
ALTER TABLE deployment
    DROP COLUMN history_lost_at,
    DROP COLUMN database_oid,
    DROP COLUMN timeline;
