-- +goose Up
-- Every serving process registers here and heartbeats. A lease held by an
-- instance that stopped heartbeating (killed, partitioned) is stale at once,
-- so the completer need not wait out the lease length after a crash; the
-- lease token still fences the instance should it come back.
CREATE TABLE instances (
    id           uuid        PRIMARY KEY,
    hostname     text        NOT NULL,
    pid          integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX instances_heartbeat_at_idx ON instances (heartbeat_at);

-- +goose Down
DROP TABLE instances;
