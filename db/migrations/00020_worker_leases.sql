-- +goose Up
-- A background task that must run in one process at a time (the
-- completer's run) holds a row here while it runs. The row is the lock: it
-- is taken, renewed and released each in a statement of its own, so it
-- needs no session to outlive a transaction, and works through PgBouncer in
-- transaction pooling mode, where a session-level advisory lock taken on one
-- server connection would be released on another, or leak. A holder that
-- dies stops renewing, and its row may be taken once expires_at has passed,
-- by the database's clock.
CREATE TABLE worker_leases (
    name       text        PRIMARY KEY,
    holder     uuid        NOT NULL,
    taken_at   timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE worker_leases;
