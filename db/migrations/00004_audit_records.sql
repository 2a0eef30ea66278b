-- +goose Up
-- An append-only trail of what the service did on a user's behalf, written in
-- the same transaction as the change it records.
CREATE TABLE audit_records (
    id            bigserial PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES users (id),
    action        text        NOT NULL,
    resource_type text        NOT NULL,
    resource_id   bigint      NOT NULL,
    data          jsonb       NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX audit_records_resource_idx ON audit_records (resource_type, resource_id);
CREATE INDEX audit_records_user_id_created_at_idx ON audit_records (user_id, created_at);

-- +goose Down
DROP TABLE audit_records;
